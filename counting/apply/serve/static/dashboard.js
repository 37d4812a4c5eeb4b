// The dashboard of `counting serve`: polls the API, draws the cameras and an SVG chart.
// No library and no network beyond this server: it must work offline.
"use strict";

const token = new URLSearchParams(location.search).get("token");
const headers = token ? { Authorization: "Bearer " + token } : {};
const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];
const CAMERA_POLL_MS = 2000;
const CHART_POLL_MS = 5000;
const SVG = "http://www.w3.org/2000/svg";
// A count its record says is unreliable is marked as count's table and the drawn frame mark it
// (counting.apply.video.UNRELIABLE_MARKS): the record's key, the words shown.
const UNRELIABLE_MARKS = [["unfamiliar", "unlike training"], ["disputed", "disputed"]];
const cards = new Map(); // camera name -> its card's elements
const frameSeen = new Map(); // camera name -> frames count of the picture shown

async function api(path) {
  const response = await fetch(path, { headers, cache: "no-store" });
  if (!response.ok) throw new Error(path + ": HTTP " + response.status);
  return response;
}

function fmt(value, digits = 1) {
  return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
}

function interval(entry) {
  return entry && entry.low !== undefined && entry.low !== null ? "[" + fmt(entry.low) + " – " + fmt(entry.high) + "]" : "";
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function card(camera) {
  if (cards.has(camera.name)) return cards.get(camera.name);
  const root = el("article", "camera");
  root.dataset.camera = camera.name;
  const title = el("h2", null, camera.name);
  const state = el("span", "state");
  title.appendChild(state);
  const countLine = el("div");
  const count = el("span", "count", "–");
  const range = el("span", "interval");
  const marks = el("span", "marks");
  countLine.append(count, range, marks);
  const image = el("img", "frame");
  image.alt = "latest counted frame of " + camera.name;
  image.title = "click: full width";
  image.addEventListener("click", () => root.classList.toggle("wide"));
  const zones = el("table", "zones");
  const meta = el("div", "meta");
  const error = el("div", "error");
  root.append(title, countLine, image, zones, meta, error);
  document.getElementById("cameras").appendChild(root);
  const parts = { root, state, count, range, marks, image, zones, meta, error };
  cards.set(camera.name, parts);
  return parts;
}

function renderCamera(camera) {
  const parts = card(camera);
  parts.state.textContent = camera.state;
  parts.state.className = "state state-" + camera.state;
  const latest = camera.latest;
  parts.count.textContent = latest ? fmt(latest.count) : "–";
  parts.count.dataset.count = latest ? String(latest.count) : "";
  parts.range.textContent = latest ? interval(latest) : "";
  parts.marks.textContent = latest ? UNRELIABLE_MARKS.filter(([key]) => latest[key]).map(([, words]) => words).join(", ") : "";
  const rows = latest ? Object.entries(latest.zones || {}) : [];
  parts.zones.replaceChildren();
  if (rows.length) {
    const head = el("tr");
    head.append(el("th", null, "zone"), el("th", null, "count"), el("th", null, "interval"));
    parts.zones.appendChild(head);
    for (const [name, entry] of rows) {
      const row = el("tr");
      row.dataset.zone = name;
      row.append(el("td", null, name), el("td", "zone-count", fmt(entry.count)), el("td", null, interval(entry)));
      parts.zones.appendChild(row);
    }
  }
  const when = latest ? new Date(latest.time * 1000).toLocaleTimeString() : "never";
  parts.meta.textContent =
    camera.source + " · " + camera.model + " · " + camera.fps + " fps · " + camera.frames + " frames · lag " +
    (camera.lag_s === null ? "–" : fmt(camera.lag_s, 2) + " s") + " · last " + when;
  parts.error.textContent = camera.last_error && camera.state !== "running" ? camera.last_error : "";
  if (latest && frameSeen.get(camera.name) !== camera.frames) {
    frameSeen.set(camera.name, camera.frames);
    refreshFrame(camera.name, parts.image);
  }
}

async function refreshFrame(name, image) {
  try {
    const response = await api("api/cameras/" + encodeURIComponent(name) + "/frame.jpg");
    const blob = await response.blob();
    const previous = image.src;
    image.src = URL.createObjectURL(blob);
    if (previous.startsWith("blob:")) URL.revokeObjectURL(previous);
  } catch (error) {
    /* the next poll tries again */
  }
}

async function pollCameras() {
  const status = document.getElementById("status");
  try {
    const cameras = await (await api("api/cameras")).json();
    cameras.forEach(renderCamera);
    status.textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.updated = String(Date.now());
  } catch (error) {
    status.textContent = "cannot reach the server (" + error.message + ")";
  }
}

function svg(tag, attributes) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  return node;
}

function drawChart(rows, startS, endS) {
  const chart = document.getElementById("chart");
  // A history shorter than the window fills the chart (at least 10 s): the first minutes
  // of a new server are readable, not a sliver at the right edge.
  if (rows.length) startS = Math.max(startS, Math.min(rows[0].time, endS - 10));
  const W = 900, H = 260, left = 44, right = 12, top = 10, bottom = 26;
  const series = new Map();
  for (const row of rows) {
    if (!series.has(row.camera)) series.set(row.camera, []);
    series.get(row.camera).push(row);
  }
  let high = 1;
  for (const row of rows) high = Math.max(high, row.high ?? row.count, row.count);
  high = Math.ceil(high * 1.1);
  const x = (t) => left + ((t - startS) / (endS - startS)) * (W - left - right);
  const y = (v) => H - bottom - (v / high) * (H - top - bottom);
  chart.replaceChildren();
  for (let k = 0; k <= 4; k++) {
    const value = (high * k) / 4;
    chart.appendChild(svg("line", { class: "grid", x1: left, x2: W - right, y1: y(value), y2: y(value) }));
    const label = svg("text", { x: left - 6, y: y(value) + 4, "text-anchor": "end" });
    label.textContent = value.toFixed(0);
    chart.appendChild(label);
  }
  for (let k = 0; k <= 6; k++) {
    const t = startS + ((endS - startS) * k) / 6;
    const anchor = k === 0 ? "start" : k === 6 ? "end" : "middle";
    const label = svg("text", { x: x(t), y: H - 8, "text-anchor": anchor });
    const clock = endS - startS < 600 ? { hour: "2-digit", minute: "2-digit", second: "2-digit" } : { hour: "2-digit", minute: "2-digit" };
    label.textContent = new Date(t * 1000).toLocaleTimeString([], clock);
    chart.appendChild(label);
  }
  chart.appendChild(svg("line", { class: "axis", x1: left, x2: left, y1: top, y2: H - bottom }));
  chart.appendChild(svg("line", { class: "axis", x1: left, x2: W - right, y1: H - bottom, y2: H - bottom }));
  const legend = document.getElementById("legend");
  legend.replaceChildren();
  let index = 0;
  for (const [camera, points] of series) {
    const colour = COLOURS[index++ % COLOURS.length];
    const banded = points.filter((p) => p.low !== null && p.high !== null);
    if (banded.length > 1) {
      const upper = banded.map((p) => x(p.time) + "," + y(p.high));
      const lower = banded.slice().reverse().map((p) => x(p.time) + "," + y(p.low));
      chart.appendChild(svg("polygon", { points: upper.concat(lower).join(" "), fill: colour, "fill-opacity": 0.15 }));
    }
    const line = svg("polyline", {
      points: points.map((p) => x(p.time) + "," + y(p.count)).join(" "),
      fill: "none", stroke: colour, "stroke-width": 2, "data-camera": camera,
    });
    chart.appendChild(line);
    const last = points[points.length - 1]; // the newest point, also all there is of a new camera
    chart.appendChild(svg("circle", { cx: x(last.time), cy: y(last.count), r: 3.5, fill: colour }));
    const item = el("span");
    const swatch = el("span", "swatch");
    swatch.style.background = colour;
    item.append(swatch, document.createTextNode(camera));
    legend.appendChild(item);
  }
  chart.dataset.points = String(rows.length);
  chart.dataset.end = String(endS);
}

async function pollChart() {
  const hours = Number(document.getElementById("hours").value);
  const endS = Date.now() / 1000;
  const startS = endS - hours * 3600;
  // About 300 points per camera over the rows in the window, averaged by the server.
  const query = "zone=&start=" + startS.toFixed(3) + "&points=300";
  try {
    const history = await (await api("api/history?" + query)).json();
    drawChart(history.rows, startS, endS);
  } catch (error) {
    /* the next poll tries again */
  }
}

function csvLink() {
  // Downloads cannot carry the Authorization header: with a token, the link fetches and saves.
  const link = document.getElementById("csv");
  link.addEventListener("click", async (event) => {
    if (!token) return;
    event.preventDefault();
    const blob = await (await api("api/history.csv")).blob();
    const a = el("a");
    a.href = URL.createObjectURL(blob);
    a.download = "counting-history.csv";
    a.click();
  });
}

document.getElementById("hours").addEventListener("change", pollChart);
csvLink();
pollCameras();
pollChart();
setInterval(pollCameras, CAMERA_POLL_MS);
setInterval(pollChart, CHART_POLL_MS);

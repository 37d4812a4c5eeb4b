"""The AGP at scale on the US flight-delay data (Hensman et al., UAI 2013; Pintea et al. 2018, Sec. 5).

Fits and scores on one or more ``.npz`` files with ``X`` (n, 8: the Hensman features) and ``y``
(arrival delay, minutes), concatenated.  A random test part (``--test-rows``, 100 000 as Hensman
et al.) is held out; the rest trains, optionally repeated (``--train-rows 2000000``) to time a
2 M-row fit.  Every model fits in its own subprocess so its peak memory (``ru_maxrss``: the
whole process, interpreter, data and fit) is its own.  Prints fit time, peak memory and test
RMSE for the train mean, linear regression, HistGradientBoosting (defaults, and ``hgb-tuned``:
up to 2000 trees of 127 leaves, stopped early), a Nystroem (500) + ridge kernel approximation,
GPyTorch SVGP and the AGP, beside the published rows.  Every model runs with ``--threads``
threads (default 1) and the load average is printed beside every row: compare rows of one run.

    python scripts/airline.py ../shared/data/airline-2008-01/airline_2008_01.npz
    python scripts/airline.py FILE --train-rows 2000000 --models agp     # the 2 M-row timing
    python scripts/airline.py FILE --memmap /tmp/airline                  # fit from a memory-mapped .npy

Settings are chosen with ``--select 50000`` (scored on held-out training rows, the test part
untouched); the chosen AGP (docs/agp.md, "At scale"):

    python scripts/airline.py FILE --inputs clock --mean trees --kernel diagonal --learning-rate 0.01 --epochs 100 \
        --svgp-epochs 40 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# Columns of X (the file's ``columns``): month, dayOfMonth, dayOfWeek, plane_age, airTime,
# distance, arrTime, depTime.
AIR_TIME, DISTANCE, ARR_TIME, DEP_TIME = 4, 5, 6, 7
MODELS = ("mean", "linear", "hgb", "hgb-tuned", "nystroem", "svgp", "agp")
# HistGradientBoosting given the same time box as the GPs: more and larger trees, stopped early on
# its own 10 % of the training rows (chosen with --select 50000, docs/agp.md "At scale").
HGB_TUNED = {"max_iter": 2000, "max_leaf_nodes": 127, "early_stopping": True}
NYSTROEM_COMPONENTS = 500
PUBLISHED = (  # Jan-Apr 2008, 700 K train / 100 K test (Hensman et al. 2013; Pintea et al. 2018, Table 3)
    ("AGP (Pintea et al. 2018)", 30.09),
    ("PIC (published)", 33.35),
    ("FITC / DTC (published)", 39.53),
)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def cpu_model() -> str:
    """The processor's name: figures differ between the AVX2-only and AVX-512 machines."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def load(files: list[str]) -> tuple[np.ndarray, np.ndarray]:
    parts_X, parts_y = [], []
    for name in files:
        with np.load(name, allow_pickle=False) as archive:
            parts_X.append(archive["X"].astype(np.float64))
            parts_y.append(archive["y"].astype(np.float64))
    return np.concatenate(parts_X), np.concatenate(parts_y)


def clock_inputs(X: np.ndarray) -> np.ndarray:
    """The same 8 columns with the clock times (hhmm) as minutes after midnight and the skewed
    air time and distance on a log scale: 12:59 and 13:00 are one minute apart, not 41 units."""
    X = X.copy()
    for column in (ARR_TIME, DEP_TIME):
        X[:, column] = (X[:, column] // 100) * 60 + X[:, column] % 100
    for column in (AIR_TIME, DISTANCE):
        X[:, column] = np.log1p(np.maximum(X[:, column], 0.0))
    return X


def quantile_inputs(X_train: np.ndarray, X_test: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Every column mapped to a standard normal through its empirical quantiles (scikit-learn's
    ``QuantileTransformer``, 1000 quantiles of 100 000 rows), fitted on the training rows only.

    A monotone warping per column: it subsumes ``--inputs clock`` (both of its maps are monotone)
    and spreads the skewed columns (air time, distance, plane age) evenly for a distance kernel.
    """
    from sklearn.preprocessing import QuantileTransformer

    warp = QuantileTransformer(n_quantiles=1000, output_distribution="normal", subsample=100_000, random_state=seed)
    return warp.fit_transform(X_train), warp.transform(X_test)


def split(args: argparse.Namespace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Random test part as Hensman et al.; the training part repeated up to ``--train-rows``.

    ``--select N``: the test part is left out altogether and N random training rows are scored
    instead, so settings are chosen without looking at the test rows.
    """
    X, y = load(args.files)
    if args.inputs == "clock":
        X = clock_inputs(X)
    order = np.random.default_rng(args.seed).permutation(len(X))
    test, train = order[: args.test_rows], order[args.test_rows :]
    if args.select:
        test, train = train[: args.select], train[args.select :]
    if args.train_rows:
        train = np.resize(train, args.train_rows)  # repeats the training rows (never test rows)
    X_train, X_test = X[train], X[test]
    if args.inputs == "quantile":
        X_train, X_test = quantile_inputs(X_train, X_test, args.seed)
    return X_train, y[train], X_test, y[test]


def fit_agp(args: argparse.Namespace, X: np.ndarray, y: np.ndarray):
    from agp import AGPRegressor

    if args.memmap:
        folder = Path(args.memmap)
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / "X_train.npy", X)
        del X
        X = np.load(folder / "X_train.npy", mmap_mode="r")
    model = AGPRegressor(
        n_centers=args.n_centers,
        kernel=args.kernel,
        max_epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        lr_schedule=args.lr_schedule,
        optimizer=args.optimizer,
        momentum=args.momentum,
        center_method=args.center_method,
        mean=args.mean,
        validation_fraction=args.validation,
        validation_loss=args.validation_loss,
        random_state=args.seed,
        verbose=args.verbose,
    )
    return model.fit(X, y)


def fit_svgp(args: argparse.Namespace, X: np.ndarray, y: np.ndarray):
    """GPyTorch's stochastic variational GP (Hensman et al. 2013), ARD RBF, learned inducing points."""
    import gpytorch
    import torch

    torch.set_num_threads(args.threads)  # torch's default is every core, whatever OMP_NUM_THREADS says
    torch.manual_seed(args.seed)
    x_mean, x_std = X.mean(axis=0), X.std(axis=0)
    x_std = np.where(x_std > 0, x_std, 1.0)  # one month: the month column is constant
    y_mean, y_std = y.mean(), y.std()
    X_t = torch.as_tensor((X - x_mean) / x_std, dtype=torch.float32)
    y_t = torch.as_tensor((y - y_mean) / y_std, dtype=torch.float32)
    inducing = X_t[torch.randperm(len(X_t))[: args.n_centers]].clone()

    class SVGP(gpytorch.models.ApproximateGP):
        def __init__(self) -> None:
            distribution = gpytorch.variational.CholeskyVariationalDistribution(len(inducing))
            strategy = gpytorch.variational.VariationalStrategy(
                self, inducing, distribution, learn_inducing_locations=True
            )
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[1]))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    model, likelihood = SVGP(), gpytorch.likelihoods.GaussianLikelihood()
    optimizer = torch.optim.Adam([*model.parameters(), *likelihood.parameters()], lr=0.01)
    elbo = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(X_t))
    model.train(), likelihood.train()
    batch = max(args.batch_size, 1024)
    for _ in range(args.svgp_epochs):
        for index in torch.randperm(len(X_t)).split(batch):
            optimizer.zero_grad()
            loss = -elbo(model(X_t[index]), y_t[index])
            loss.backward()
            optimizer.step()
    model.eval(), likelihood.eval()

    class Predictor:
        def predict(self, X_new: np.ndarray) -> np.ndarray:
            X_s = torch.as_tensor((X_new - x_mean) / x_std, dtype=torch.float32)
            with torch.no_grad(), gpytorch.settings.fast_pred_var():
                means = [model(block).mean for block in X_s.split(8192)]
            return torch.cat(means).numpy().astype(np.float64) * y_std + y_mean

    return Predictor()


class NystroemRidge:
    """Ridge regression on scikit-learn's ``Nystroem`` features (RBF, gamma 1/D on standardised
    inputs, ``n_components`` random landmarks): a kernel method fitted by least squares.

    The normal equations are summed over row blocks, so the fit never holds the n x 500 feature
    matrix (1.5 GB at 370 000 rows; scikit-learn's ``Ridge`` on it peaked at 3 GiB).
    """

    BLOCK_ROWS = 32_768

    def __init__(self, n_components: int, seed: int, alpha: float = 1.0) -> None:
        self.n_components, self.seed, self.alpha = n_components, seed, alpha

    def _features(self, X: np.ndarray) -> np.ndarray:
        return self.nystroem_.transform((X - self.x_mean_) / self.x_scale_)

    def fit(self, X: np.ndarray, y: np.ndarray) -> NystroemRidge:
        from sklearn.kernel_approximation import Nystroem

        self.x_mean_, scale = X.mean(axis=0), X.std(axis=0)
        self.x_scale_ = np.where(scale > 0, scale, 1.0)
        landmarks = np.random.default_rng(self.seed).choice(len(X), size=self.n_components, replace=False)
        self.nystroem_ = Nystroem(n_components=self.n_components, random_state=self.seed)
        self.nystroem_.fit((X[landmarks] - self.x_mean_) / self.x_scale_)  # the landmarks are its rows
        self.y_mean_ = float(y.mean())
        m = self.n_components
        gram, moment, feature_sum = np.zeros((m, m)), np.zeros(m), np.zeros(m)
        for first in range(0, len(X), self.BLOCK_ROWS):
            F = self._features(X[first : first + self.BLOCK_ROWS])
            gram += F.T @ F
            moment += F.T @ (y[first : first + self.BLOCK_ROWS] - self.y_mean_)
            feature_sum += F.sum(axis=0)
        # Centred features (an unpenalised intercept): F_c^T F_c = F^T F - n mu mu^T, F_c^T y_c = F^T y_c.
        mu = feature_sum / len(X)
        gram -= len(X) * np.outer(mu, mu)
        self.coef_ = np.linalg.solve(gram + self.alpha * np.eye(m), moment)
        self.intercept_ = self.y_mean_ - float(mu @ self.coef_)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.concatenate(
            [
                self._features(X[first : first + self.BLOCK_ROWS]) @ self.coef_ + self.intercept_
                for first in range(0, len(X), self.BLOCK_ROWS)
            ]
        )


def fit(name: str, args: argparse.Namespace, X: np.ndarray, y: np.ndarray):
    if name == "mean":
        from sklearn.dummy import DummyRegressor

        return DummyRegressor().fit(X, y)
    if name == "linear":
        from sklearn.linear_model import LinearRegression

        return LinearRegression().fit(X, y)
    if name == "hgb":
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(random_state=args.seed).fit(X, y)
    if name == "hgb-tuned":
        from sklearn.ensemble import HistGradientBoostingRegressor

        return HistGradientBoostingRegressor(**HGB_TUNED, random_state=args.seed).fit(X, y)
    if name == "nystroem":
        return NystroemRidge(NYSTROEM_COMPONENTS, args.seed).fit(X, y)
    if name == "svgp":
        return fit_svgp(args, X, y)
    return fit_agp(args, X, y)


def run_one(name: str, args: argparse.Namespace) -> dict:
    """Fit and score one model in this process; its peak memory is this process's."""
    X, y, X_test, y_test = split(args)
    start = time.perf_counter()
    model = fit(name, args, X, y)
    seconds = time.perf_counter() - start
    rmse = float(np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2)))
    result = {"model": name, "rmse": rmse, "fit_s": seconds, "n_train": len(y), "n_test": len(y_test)}
    result["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    if name == "agp":
        result["best_epoch"] = int(model.best_epoch_)
        result["epochs_run"] = len(model.history_["val_loss"]) - 1
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help=".npz files with X (n, 8) and y (n,), concatenated")
    parser.add_argument("--test-rows", type=int, default=100_000, help="random test part (Hensman et al.: 100 000)")
    parser.add_argument("--train-rows", type=int, default=0, help="repeat the training part to this many rows")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--n-centers", type=int, default=100, help="AGP centers and SVGP inducing points")
    parser.add_argument("--kernel", default="univariate", help="AGP kernel")
    parser.add_argument("--epochs", type=int, default=10, help="AGP max_epochs")
    parser.add_argument("--learning-rate", type=float, default=None, help="AGP learning rate (default: its own)")
    parser.add_argument(
        "--lr-schedule", choices=("constant", "cosine"), default="constant", help="AGP rate after the warm-up"
    )
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default="adam", help="AGP optimizer")
    parser.add_argument("--momentum", type=float, default=0.9, help="AGP SGD momentum (--optimizer sgd)")
    parser.add_argument("--batch-size", type=int, default=1024, help="AGP (and SVGP, at least 1024) minibatch")
    parser.add_argument("--mean", default="linear", help="AGP mean function (zero, constant, linear, trees)")
    parser.add_argument("--center-method", default="kmeans", help="AGP center_method (kmeans, sampling, gmm)")
    parser.add_argument(
        "--validation-loss", choices=("mse", "huber"), default="mse", help="AGP statistic picking the best epoch"
    )
    parser.add_argument("--validation", type=float, default=0.1, help="AGP validation_fraction")
    parser.add_argument(
        "--inputs",
        choices=("raw", "clock", "quantile"),
        default="raw",
        help="raw: the 8 columns as stored; clock: times as minutes after midnight, log air time and distance; "
        "quantile: every column warped to a standard normal by its quantiles on the training rows",
    )
    parser.add_argument("--select", type=int, default=0, help="score on N held-out training rows, not the test part")
    parser.add_argument("--svgp-epochs", type=int, default=2)
    parser.add_argument("--memmap", metavar="DIR", help="fit the AGP from a memory-mapped .npy written here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="AGP: one line per epoch")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="threads for every model alike (BLAS/OpenMP, torch, HistGradientBoosting): a fair table "
        "compares at equal threads; 1 by default, as the other engineers' jobs share the cores",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one model, print JSON
    args = parser.parse_args()

    if args.one:
        print(json.dumps(run_one(args.one, args)))
        return
    load_average = os.getloadavg()
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} CPUs, load average {load_average[0]:.1f}; "
        f"{args.threads} thread(s) for every model; "
        f"files: {', '.join(Path(f).name for f in args.files)}; seed {args.seed}; inputs {args.inputs}"
        + (f"; scored on {args.select} held-out TRAIN rows (--select)" if args.select else "")
    )
    results = []
    # Every library reads its thread count from these when it starts: set before the child runs.
    threads = str(args.threads)
    environment = {**os.environ, **dict.fromkeys(THREAD_VARIABLES, threads)}
    for name in args.models.split(","):
        command = [sys.executable, __file__, *sys.argv[1:], "--one", name]
        completed = subprocess.run(command, capture_output=True, text=True, check=False, env=environment)
        if completed.returncode != 0:
            print(f"{name}: failed\n{completed.stderr.strip().splitlines()[-1] if completed.stderr else ''}")
            continue
        if args.verbose and completed.stdout.count("\n") > 1:
            print("\n".join(completed.stdout.strip().splitlines()[:-1]))
        results.append(json.loads(completed.stdout.strip().splitlines()[-1]))
        r = results[-1]
        print(
            f"{r['model']:8s} train {r['n_train']:>9,d} test {r['n_test']:>7,d}  RMSE {r['rmse']:7.2f}  "
            f"fit {r['fit_s']:7.1f} s  peak {r['peak_mib']:7.0f} MiB  load {os.getloadavg()[0]:4.1f}"
            + (f"  best epoch {r['best_epoch']}/{r['epochs_run']}" if "best_epoch" in r else ""),
            flush=True,
        )
    by_name = {r["model"]: r["rmse"] for r in results}
    peers = {name: rmse for name, rmse in by_name.items() if name != "agp"}
    if "agp" in by_name and peers:
        best = min(peers, key=peers.__getitem__)
        verdict = "the AGP is best" if by_name["agp"] < peers[best] else f"{best} is better"
        print(f"AGP {by_name['agp']:.2f} vs best other model {best} {peers[best]:.2f}: {verdict}")
    if "agp" in by_name and "linear" in by_name:
        gain = 100 * (1 - by_name["agp"] / by_name["linear"])
        print(f"AGP vs linear regression: {gain:+.1f} % lower RMSE (target >= 7 %)")
    if "agp" in by_name and "svgp" in by_name:
        print(f"AGP vs SVGP: {by_name['agp']:.2f} vs {by_name['svgp']:.2f} (target: no worse)")
    for label, value in PUBLISHED:
        print(f"{label:26s} RMSE {value:6.2f}  (Jan-Apr 2008, 700 K train / 100 K test)")


if __name__ == "__main__":
    main()

"""The crowd model's add-ons, each a stage of its count: the sparse gate (the detector's count of sparse photos), the router of the specialists, the people mask."""

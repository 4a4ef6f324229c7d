"""Planning a run: the mean-field model of training, its predictions and agreement with the
simulator, and the planner behind ``isosim plan``."""

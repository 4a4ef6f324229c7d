"""The IsoCompute study in simulation: every named sweep (the study's three questions and the
findings' sweeps) in one registry, the twelve findings (one module each: sweeps, check, figure,
text) and ``isosim reproduce``."""

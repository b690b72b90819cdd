"""`switch doctor`'s checks, also the dashboard's health pane: `doctor.py` runs them in order; one module per
subject (`base`, `budgets`, `presets`, `probes`, `service`, `team`, `wiring`). Nothing is imported here, so
importing one check does not load them all."""

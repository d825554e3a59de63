"""The benchmark scenarios A-H of the benchmark issue; each returns a `ScenarioResult`."""

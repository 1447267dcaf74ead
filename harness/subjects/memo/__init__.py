"""The figures memo: exact figures kept by what decides them (sources, harness, config, env)."""

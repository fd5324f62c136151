"""Scenario tests that run both quiet and under load (issue 17, tests/scenario_lib.sh)."""

def scenario_test(name, loaded = True, **kwargs):
    """An sh_test `name`, plus `<name without _test>_loaded_test` with 2 busy processes per CPU.

    The loaded twin sets STRATA_TEST_LOAD=auto: tests/scenario_lib.sh then starts 2 CPU-bound
    processes per CPU beside the scenario for its whole run (a busy machine, as users have).
    Its checks are the same: every figure a scenario asserts must hold on a busy machine.
    """
    native.sh_test(name = name, **kwargs)
    if loaded:
        if not name.endswith("_test"):
            fail("scenario_test names end in _test: " + name)
        env = dict(kwargs.pop("env", {}))
        env["STRATA_TEST_LOAD"] = "auto"
        native.sh_test(name = name[:-len("_test")] + "_loaded_test", env = env, **kwargs)

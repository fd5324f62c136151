"""Scenario tests that run both quiet and under load (issue 17, tests/scenario_lib.sh)."""

def scenario_test(name, loaded = True, **kwargs):
    """An sh_test `name`, plus `<name without _test>_loaded_test` on a machine at 2 runnable per CPU.

    The loaded twin sets STRATA_TEST_LOAD=auto: tests/scenario_lib.sh then tops the machine up to 2
    runnable processes per CPU (2 per CPU less the load average already there) with CPU-bound
    processes beside the scenario for its whole run (a busy machine, as users have).
    Its checks are the same: every figure a scenario asserts must hold on a busy machine.

    loaded = True: the twin runs with the suite (CI). loaded = "soak": the twin is tagged "soak",
    which CI's whole-suite run leaves out (tools/test.sh) and `tools/soak.sh --loaded-twins` runs:
    for the long scenarios whose quiet twin already runs beside CI's own load and whose checks do
    not depend on it (tests/README.md, "Loaded twins in soak"). loaded = False: no twin.
    """
    native.sh_test(name = name, **kwargs)
    if loaded:
        if not name.endswith("_test"):
            fail("scenario_test names end in _test: " + name)
        if loaded != True and loaded != "soak":
            fail("scenario_test loaded is True, False or \"soak\": " + str(loaded))
        env = dict(kwargs.pop("env", {}))
        env["STRATA_TEST_LOAD"] = "auto"
        if loaded == "soak":
            kwargs["tags"] = kwargs.pop("tags", []) + ["soak"]
        native.sh_test(name = name[:-len("_test")] + "_loaded_test", env = env, **kwargs)

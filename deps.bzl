"""strata_deps(): the repositories Strata's BUILD files name, for a workspace that uses Strata.

Bazel does not read a dependency's WORKSPACE, so a workspace that declares Strata
(local_repository(name = "strata", ...)) must also declare what Strata's BUILD files use:
Bazel's rule stand-ins (tools/bazel/, offline) and the Debian system headers (abseil,
RapidJSON, Catch2, Google Benchmark, SpiderMonkey 102; tools/setup.sh installs them). This
macro declares them all, as Strata's own WORKSPACE does (keep the two alike):

    local_repository(name = "strata", path = "../strata")
    load("@strata//:deps.bzl", "strata_deps")
    strata_deps(path = "../strata")   # the same path as the local_repository

A repository the workspace declared already (its own rules_cc, say) is left as it is.
"""

def _declare(rule, name, **kwargs):
    if not native.existing_rule(name):
        rule(name = name, **kwargs)

def strata_deps(path):
    """Declares Strata's repositories.

    Args:
      path: Strata's checkout, as given to its local_repository (relative to the workspace,
        or absolute).
    """
    _declare(native.local_repository, "rules_cc", path = path + "/tools/bazel/rules_cc")
    _declare(native.local_repository, "rules_java", path = path + "/tools/bazel/rules_java")
    _declare(native.local_repository, "remote_coverage_tools", path = path + "/tools/bazel/remote_coverage_tools")
    _declare(native.local_repository, "platforms", path = "/usr/share/bazel/tools/platforms")
    for name, headers in [
        ("absl", "/usr/include/absl"),
        ("rapidjson", "/usr/include/rapidjson"),
        ("catch2", "/usr/include/catch2"),
        ("benchmark", "/usr/include/benchmark"),
        ("mozjs", "/usr/include/mozjs-102"),
    ]:
        _declare(
            native.new_local_repository,
            name,
            path = headers,
            build_file = "@strata//tools/bazel/third_party:%s.BUILD" % name,
        )

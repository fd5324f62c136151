"""static_c_program: a statically linked C test program, in every build configuration."""

def static_c_program(name, src, visibility = None):
    """`name`: the executable, built from the one C file `src` with `$(CC) -static -O1`.

    A genrule, not a cc_binary: the sanitizer configs (.bazelrc) add --linkopt=-fsanitize=...
    to every cc_binary, and gcc refuses -static with -fsanitize=thread (or address), so a
    static cc_binary broke `bazel build //... --config=tsan`. The scenarios that use such a
    program only need it static (Strata refuses it, never profiles it): no sanitizer wanted.
    """
    native.genrule(
        name = name + "_build",
        srcs = [src],
        outs = [name],
        cmd = "$(CC) -static -O1 -o $@ $<",
        executable = True,
        toolchains = ["@bazel_tools//tools/cpp:current_cc_toolchain"],
        visibility = visibility,
    )

"""strata_fuzz_test: a libFuzzer target replayed over its committed corpus as a unit test.

    strata_fuzz_test(
        name = "entry_deserializer_fuzzer",       # the source is <name>.cc
        deps = [...],
    )

makes the cc_test `<name>_test`: <name>.cc linked with tools/testing/fuzz_replay_main.cc
(gcc, the normal toolchain), run over every file of fuzz_corpus/<name>/ in the same package.
`src` and `corpus` name them explicitly when the source sits in a subdirectory of the package
(the corpus always sits beside the source: tools/fuzz.sh looks for it there).
The test fails when the corpus is empty or any input fails a check. tools/fuzz.sh builds the
same source with clang and libFuzzer to fuzz it and grows that corpus (docs/reliability.md).
"""

def strata_fuzz_test(name, deps = [], src = None, corpus = None, size = "small", **kwargs):
    src = src or name + ".cc"
    corpus = corpus or "fuzz_corpus/" + name
    native.cc_test(
        name = name + "_test",
        size = size,
        srcs = [src],
        args = [native.package_name() + "/" + corpus],
        data = native.glob([corpus + "/*"]),
        deps = deps + ["//tools/testing:fuzz_replay_main"],
        **kwargs
    )

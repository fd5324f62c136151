"""The repository's own headers of C++ targets as runfiles (tests/install)."""

def _repository_headers_impl(ctx):
    headers = []
    for dep in ctx.attr.deps:
        for header in dep[CcInfo].compilation_context.headers.to_list():
            # Only this repository's source headers: not external/ (abseil, mozjs).
            if header.owner.workspace_name == "" and header.is_source:
                headers.append(header)
    return [DefaultInfo(files = depset(headers), runfiles = ctx.runfiles(files = headers))]

repository_headers = rule(
    implementation = _repository_headers_impl,
    doc = "Every header of this repository the deps' compilations see (transitively).",
    attrs = {"deps": attr.label_list(providers = [CcInfo])},
)

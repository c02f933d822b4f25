"""deploy/Dockerfile: multi-stage, non-root, nothing but the virtualenv at run time, and an entry point
that runs every role the manifests ask of it."""

from __future__ import annotations

import tomllib

import pytest

from tests.deploy.shared import DEPLOY, ROOT, cli_accepts, run, tool

pytestmark = pytest.mark.deploy


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    joined: list[str] = []
    pending = ""
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            joined.append(pending.strip())
            pending = ""
    return [(text.split(" ", 1)[0].upper(), text.split(" ", 1)[1] if " " in text else "") for text in joined]


def stages() -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for instruction in instructions():
        if instruction[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(instruction)
    return found


def test_the_build_and_the_runtime_are_separate_stages() -> None:
    build, runtime = stages()
    assert build[0][1].endswith(" AS build")
    assert runtime[0][1].endswith(" AS runtime")
    # The runtime takes the built virtualenv and nothing else from the build.
    copies = [args for name, args in runtime if name == "COPY"]
    assert copies == ["--from=build /opt/switchboard /opt/switchboard"]
    run_lines = " ".join(args for name, args in runtime if name == "RUN")
    for build_tool in ("apt-get", "gcc", "build-essential", "pip install"):
        assert build_tool not in run_lines


def test_the_image_installs_the_clouds_extra() -> None:
    # Anthropic on Bedrock and Vertex need botocore and google-auth (docs/providers/clouds.md).
    installs = [args for name, args in stages()[0] if name == "RUN" and "pip install" in args]
    assert any('".[clouds]"' in args for args in installs), installs


def test_the_runtime_runs_as_an_unprivileged_user() -> None:
    runtime = stages()[-1]
    users = [args for name, args in runtime if name == "USER"]
    assert users, "the runtime stage sets no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit()
    assert int(uid) >= 1000


def test_every_file_the_build_copies_exists() -> None:
    for name, args in stages()[0]:
        if name == "COPY":
            *sources, _ = args.split()
            for source in sources:
                assert (ROOT / source).exists(), source


def test_the_entry_point_is_the_installed_command_and_runs_every_role() -> None:
    runtime = dict(stages()[-1])
    assert runtime["ENTRYPOINT"] == '["switchboard"]'
    assert runtime["CMD"] == '["api"]'
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["switchboard"] == "switchboard.cli:main"
    for role in (["api"], ["worker"], ["worker", "--check"], ["tools", "serve", "app.tools:TOOLS", "--session", "s"]):
        assert cli_accepts(role), role
    assert not cli_accepts(["serve"])


def test_hadolint_finds_nothing() -> None:
    result = run([tool("hadolint"), "--failure-threshold", "warning", "deploy/Dockerfile"], ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_build_context_leaves_out_local_state() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    for path in (".venv", ".git", "tests", "**/__pycache__"):
        assert path in ignored

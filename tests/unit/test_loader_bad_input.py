"""Hostile and malformed input to the loader, and finding graphs by id.

Every failure must be a `GraphValidationError` (or `GraphNotFound`) whose message names
the file: `pytest.raises` with those classes lets any other exception fail the test.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from yaml_files import write_yaml

from graphrunner.errors import GraphNotFound, GraphValidationError
from graphrunner.loading import inspect_graph, load_graph, loader, parse_graph
from graphrunner.model import ActionNode
from graphrunner.settings import Settings

VALID = """
id: team/x
config: {start: done}
nodes:
  done:
    type: return
"""


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No graph path or size limit from the caller's environment; a cwd with nothing in it."""
    for name in ("GRAPHRUNNER_GRAPH_PATH", "GRAPHRUNNER_MAX_GRAPH_BYTES"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


def invalid(path: Path, settings: Settings | None = None) -> GraphValidationError:
    """The error loading `path` raises; it names the file, as does each of its issues."""
    with pytest.raises(GraphValidationError) as info:
        load_graph(path, settings=settings or Settings())
    error = info.value
    assert error.issues
    assert str(path) in str(error)
    assert all(i.file == str(path) for i in error.issues)
    return error


def only_issue(error: GraphValidationError, code: str) -> tuple[str, int | None]:
    """(message, line) of the one issue, which must have `code`."""
    assert error.codes == [code], error.issues
    return error.issues[0].message, error.issues[0].line


# -- malformed YAML ------------------------------------------------------------------------


def test_unclosed_bracket(tmp_path: Path) -> None:
    path = write_yaml(
        tmp_path / "g.yaml",
        """
        id: t
        config: {start: done
        nodes:
          done: {type: return}
        """,
    )
    message, line = only_issue(invalid(path), "invalid_yaml")
    assert "malformed YAML" in message
    assert line == 3


def test_bad_indentation(tmp_path: Path) -> None:
    path = write_yaml(
        tmp_path / "g.yaml",
        """
        id: t
        config:
          start: done
         nodes:
          done:
            type: return
        """,
    )
    message, line = only_issue(invalid(path), "invalid_yaml")
    assert "malformed YAML" in message
    assert line == 4


def test_tab_indentation(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text("id: t\nconfig:\n\tstart: done\n", encoding="utf-8")
    message, line = only_issue(invalid(path), "invalid_yaml")
    assert "\\t" in message or "tab" in message
    assert line == 3


def test_two_documents_in_one_file(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "g.yaml", VALID + "---\n" + VALID)
    _, line = only_issue(invalid(path), "invalid_yaml")
    assert line == 6


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"], ids=repr)
def test_empty_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text(text, encoding="utf-8")
    error = invalid(path)
    assert len(error.issues) == 1
    issue = error.issues[0]
    assert issue.code in ("invalid_yaml", "invalid_schema")
    assert "empty" in issue.message
    assert issue.line == 1


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("- a\n- b\n", "list"),
        ("hello\n", "str"),
        ("42\n", "int"),
        ("null\n", "NoneType"),
        ("---\n", "NoneType"),
    ],
    ids=["list", "string", "number", "null", "bare-document-marker"],
)
def test_document_that_is_not_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(text, encoding="utf-8")
    message, line = only_issue(invalid(path), "invalid_schema")
    assert "must be a mapping" in message
    assert kind in message
    assert line == 1


def test_parse_graph_of_a_list_names_the_file_given() -> None:
    with pytest.raises(GraphValidationError) as info:
        parse_graph("- a\n", file="inline.yaml", settings=Settings())
    assert info.value.codes == ["invalid_schema"]
    assert "must be a mapping" in info.value.issues[0].message
    assert "inline.yaml" in str(info.value)


# -- size, depth and alias limits ----------------------------------------------------------


def test_ten_megabyte_file_is_rejected_before_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "huge.yaml"
    line = "# " + "x" * 98 + "\n"
    path.write_text("id: huge\n" + line * (10 * 1024 * 1024 // len(line)), encoding="utf-8")
    assert path.stat().st_size > 10_000_000

    def no_parsing(*args: object, **kwargs: object) -> None:
        raise AssertionError("the file was parsed")

    monkeypatch.setattr(loader, "parse_yaml", no_parsing)
    message, _ = only_issue(invalid(path), "invalid_yaml")
    assert str(path.stat().st_size) in message
    assert "1048576" in message
    assert "limit" in message


def test_size_limit_comes_from_settings(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "g.yaml", VALID)
    size = path.stat().st_size
    message, _ = only_issue(invalid(path, Settings(max_graph_bytes=size - 1)), "invalid_yaml")
    assert f"{size - 1}-byte limit" in message
    assert load_graph(path, settings=Settings(max_graph_bytes=size)).id == "team/x"


def test_parse_graph_text_over_the_limit_is_rejected() -> None:
    with pytest.raises(GraphValidationError) as info:
        parse_graph(textwrap.dedent(VALID), file="big.yaml", settings=Settings(max_graph_bytes=10))
    assert info.value.codes == ["invalid_yaml"]
    assert "limit" in info.value.issues[0].message


def deep_error(path: Path, settings: Settings | None = None) -> str:
    message, _ = only_issue(invalid(path, settings), "invalid_yaml")
    assert "nested too deeply" in message
    return message


def test_flow_sequences_nested_ten_thousand_deep(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 10000 + "]" * 10000, encoding="utf-8")
    deep_error(path)


def test_flow_mappings_nested_ten_thousand_deep(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("id: t\nx: " + "{a: " * 10000 + "1" + "}" * 10000 + "\n", encoding="utf-8")
    deep_error(path)


def test_block_mappings_nested_ten_thousand_deep(tmp_path: Path) -> None:
    # One space per level keeps the file at 50 MB; the size limit is raised so that the
    # nesting itself is what gets rejected.
    path = tmp_path / "deep.yaml"
    with path.open("w", encoding="utf-8") as fh:
        for level in range(10_000):
            fh.write(" " * level + "a:\n")
    deep_error(path, Settings(max_graph_bytes=10**9))


def test_block_mappings_nested_ten_thousand_deep_are_over_the_default_size(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("".join("  " * level + "a:\n" for level in range(10_000)), encoding="utf-8")
    message, _ = only_issue(invalid(path), "invalid_yaml")
    assert "limit" in message


def test_nesting_just_over_the_limit_gives_a_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("id: t\nconfig: {start: a}\nx: " + "[" * 70 + "]" * 70 + "\n", encoding="utf-8")
    message, line = only_issue(invalid(path), "invalid_yaml")
    assert "nested too deeply" in message
    assert line == 3


def test_self_referencing_alias(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "g.yaml", "id: t\nloop: &a [*a]\n")
    deep_error(path)


def test_billion_laughs(tmp_path: Path) -> None:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    previous = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
        previous = name
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert path.stat().st_size < 2000
    message, _ = only_issue(invalid(path), "invalid_yaml")
    assert "too large" in message


def test_aliases_below_the_limit_still_load(tmp_path: Path) -> None:
    path = write_yaml(
        tmp_path / "g.yaml",
        """
        id: t
        config: {start: a}
        nodes:
          a:
            action: {tool: echo, params: {x: &x [1, 2, 3], y: *x}}
            next: done
          done:
            type: return
        """,
    )
    graph = load_graph(path, settings=Settings())
    a = graph.spec.nodes["a"]
    assert isinstance(a, ActionNode)
    assert a.action.params == {"x": [1, 2, 3], "y": [1, 2, 3]}


# -- encodings and characters --------------------------------------------------------------


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("id: café\nconfig: {start: done}\n".encode("latin-1"))
    message, _ = only_issue(invalid(path), "invalid_yaml")
    assert "UTF-8" in message


def test_utf8_with_bom_loads(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + textwrap.dedent(VALID).encode())
    assert load_graph(path, settings=Settings()).id == "team/x"


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b"], ids=["NUL", "BEL", "ESC"])
def test_control_character(tmp_path: Path, char: str) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(f"id: t{char}\nconfig: {{start: done}}\n", encoding="utf-8")
    _, line = only_issue(invalid(path), "invalid_yaml")
    assert line == 1


@pytest.mark.parametrize(
    "text",
    [
        "id: !!python/object/apply:os.system [echo]\n",
        "id: !custom x\n",
        "id: t\n? [a, b]\n: 1\n",
    ],
    ids=["python-tag", "unknown-tag", "unhashable-key"],
)
def test_constructor_errors(tmp_path: Path, text: str) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(text, encoding="utf-8")
    error = invalid(path)
    assert error.codes == ["invalid_yaml"]
    assert error.issues[0].line is not None


# -- not found -----------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(GraphNotFound) as info:
        load_graph(path, settings=Settings())
    assert str(path) in str(info.value)
    with pytest.raises(GraphNotFound):
        inspect_graph(path, settings=Settings())


def test_directory_instead_of_file(tmp_path: Path) -> None:
    folder = tmp_path / "graphs.yaml"
    folder.mkdir()
    with pytest.raises(GraphNotFound) as info:
        load_graph(folder, settings=Settings())
    assert str(folder) in str(info.value)


def test_unknown_graph_id(tmp_path: Path) -> None:
    graphs = tmp_path / "graphs"
    write_yaml(graphs / "x.yaml", VALID)
    with pytest.raises(GraphNotFound) as info:
        load_graph("team/unknown", settings=Settings(graph_path=(graphs,)))
    assert "'team/unknown'" in str(info.value)
    assert str(graphs) in str(info.value)


def test_unknown_graph_id_without_a_graph_path() -> None:
    with pytest.raises(GraphNotFound) as info:
        load_graph("team/unknown", settings=Settings())
    assert "'team/unknown'" in str(info.value)
    assert "GRAPHRUNNER_GRAPH_PATH" in str(info.value)


# -- finding graphs by id ------------------------------------------------------------------


def test_id_found_via_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    graphs = tmp_path / "graphs"
    path = write_yaml(graphs / "x.yaml", VALID)
    write_yaml(graphs / "other.yaml", VALID.replace("team/x", "team/other"))
    monkeypatch.setenv("GRAPHRUNNER_GRAPH_PATH", f"{tmp_path / 'missing'}:{graphs}")
    graph = load_graph("team/x")
    assert graph.id == "team/x"
    assert graph.file == str(path)


def test_id_found_via_settings(tmp_path: Path) -> None:
    graphs = tmp_path / "graphs"
    path = write_yaml(graphs / "nested" / "x.yaml", VALID.replace("id: team/x", 'id: "team/x"  # quoted'))
    graph, report = inspect_graph("team/x", settings=Settings(graph_path=(graphs,)))
    assert graph is not None and report.valid
    assert graph.id == "team/x"
    assert report.file == str(path)


def test_id_in_direct_layout(tmp_path: Path) -> None:
    graphs = tmp_path / "graphs"
    path = write_yaml(graphs / "team" / "x.yaml", VALID)
    write_yaml(graphs / "decoy.yaml", VALID.replace("id: team/x", "id: team/x\ndescription: decoy"))
    graph = load_graph("team/x", settings=Settings(graph_path=(graphs,)))
    assert graph.file == str(path)
    assert graph.spec.description is None


def test_graph_without_id_takes_the_file_stem(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "hello-world.yaml", VALID.replace("id: team/x\n", ""))
    assert load_graph(path, settings=Settings()).id == "hello-world"
    graph = load_graph("hello-world", settings=Settings(graph_path=(tmp_path,)))
    assert graph.id == "hello-world"


def test_invalid_graph_found_by_id_names_its_file(tmp_path: Path) -> None:
    graphs = tmp_path / "graphs"
    path = write_yaml(graphs / "x.yaml", VALID.replace("type: return", "type: retrun"))
    with pytest.raises(GraphValidationError) as info:
        load_graph("team/x", settings=Settings(graph_path=(graphs,)))
    assert info.value.codes == ["invalid_schema"]
    assert str(path) in str(info.value)


def test_id_found_even_when_a_directory_in_the_cwd_has_its_name(tmp_path: Path) -> None:
    graphs = tmp_path / "graphs"
    path = write_yaml(graphs / "x.yaml", VALID)
    (Path.cwd() / "team" / "x").mkdir(parents=True)
    graph = load_graph("team/x", settings=Settings(graph_path=(graphs,)))
    assert graph.file == str(path)


def test_a_graph_found_by_id_without_an_id_key_takes_the_id_asked_for(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "team" / "y.yaml", "config: {start: a}\nnodes:\n  a: {type: gate}\n")
    assert load_graph("team/y", settings=Settings(graph_path=(tmp_path,))).id == "team/y"
    assert load_graph(path, settings=Settings()).id == "y"

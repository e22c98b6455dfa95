"""`graphrunner schema` and `graph_json_schema()`: the schema accepts what the model accepts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from graphrunner.cli import main
from graphrunner.loading.yaml_source import parse_yaml
from graphrunner.model import GraphSpec
from graphrunner.schema_export import DIALECT, SCHEMA_ID, graph_json_schema

GRAPHS_DIR = Path(__file__).resolve().parents[2] / "graphs"

DESIGN_EXAMPLE = """
id: examples/fetch-and-summarize
version: "1"
description: Fetch pages and summarize them
inputs:
  urls: {type: list, required: true}
  force: {type: boolean, default: false}
state:
  pages: {type: list, default: [], reducer: append}
  meta: {type: object, default: {}, reducer: merge}
  summary: {type: string}
config:
  start: fan_out
  max_steps: 200
  error_mode: fail
  env_requires: [API_TOKEN]
  hooks:
    - event: error
      when: "state.meta.retryable == true"
      action: {tool: echo, params: {control: retry}}
nodes:
  fan_out:
    type: foreach
    over: "${inputs.urls}"
    as: url
    parallel: true
    max_concurrency: 20
    tolerated_failures: "10%"
    action:
      tool: http
      params: {method: GET, url: "${url}", timeout: 10}
    collect: pages
    next: summarize
  summarize:
    action:
      tool: python
      params: {fn: "mypkg.text:summarize", args: {pages: "${state.pages}"}}
    retry: {max_attempts: 3, initial: 0.5, multiplier: 2, max_delay: 30, jitter: 1, on: [transient, timeout]}
    timeout: 60
    queue: cpu
    cache_result: true
    assign:
      summary: "${result.text}"
      meta: {summarized_at: "${_now}"}
    on_error: report
    next:
      - to: done
        when: {path: state.summary, op: exists}
      - to: report
  report:
    type: gate
    assign: {meta: {failed: true}}
    next: done
  done:
    type: return
    output: {summary: "${state.summary}", pages: "${state.pages}"}
"""

RYE_FORMS = """
id: rye/walker
version: 2
config: {start: fetch}
nodes:
  fetch:
    node_type: action
    action:
      primary: execute
      item_type: tool
      item_id: echo
      params: {ok: true}
    next: {type: unconditional, to: check}
  check:
    node_type: gate
    next:
      type: conditional
      branches:
        - {to: route, when: "state.ok == true"}
      default: finish
  route:
    action: {item_id: echo}
    next: {fn: "mypkg.routes:pick"}
  finish:
    node_type: return
"""

SHORTHANDS = """
description: no id (it defaults to the file name), shorthand field types, reducer and retry forms
inputs:
  name: str
  count: int
  anything:
state:
  items: {type: array, reducer: {name: bounded_append, max_len: 5}}
  seen: {type: list, reducer: {name: append, params: {}}}
  total: {type: float, reducer: sum}
  notes: list
config: {start: first}
nodes:
  first:
    action: {tool: echo}
    retry:
      - {on: [transient], max_attempts: 5}
      - {on: [Timeout], max_attempts: 2}
    next: {to: second, when: {all: [{path: state.total, op: gt, value: 1}, {not: "false"}]}}
  second:
    type: pause
    message: approve?
    next: {branches: [{to: third}]}
  third:
    type: subgraph
    graph: other/graph
    inputs: {x: "${state.total}"}
    next: [{to: $end}]
"""

CHILD_RUNS = """\
id: research
state: {query: {type: string}, docs: {type: list}, log: {type: list, reducer: append}, summaries: {}, errs: {}}
config: {start: research}
nodes:
  research:
    type: parallel
    branches:
      wiki: {graph: research/wiki, inputs: {query: query}, outputs: {log: log}}
      web: {graph: research/web, inputs: {query: "${state.query}"}}
    error_policy: collect
    errors_field: errs
    next: per_doc
  per_doc:
    type: foreach
    over: "${state.docs}"
    as: doc
    parallel: true
    max_concurrency: 8
    graph: docs/process
    inputs: {doc: "${doc}", position: "${index}"}
    collect: summaries
    tolerated_failures: 1
"""

INLINE_VALID = {
    "design": DESIGN_EXAMPLE,
    "rye": RYE_FORMS,
    "shorthands": SHORTHANDS,
    "child runs": CHILD_RUNS,
}

INVALID = {
    "unknown top-level key": "id: g\nstart: a\nnodes: {a: {type: return}}\n",
    "unknown node type": "id: g\nnodes: {a: {type: teleport}}\n",
    "unknown node_type": "id: g\nnodes: {a: {node_type: teleport}}\n",
    "type and node_type": "id: g\nnodes: {a: {type: return, node_type: return}}\n",
    "parallel without branches": "id: g\nnodes: {a: {type: parallel, branches: {}}}\n",
    "parallel branch without graph": "id: g\nnodes: {a: {type: parallel, branches: {x: {inputs: {}}}}}\n",
    "unknown node key": "id: g\nnodes: {a: {type: return, colour: red}}\n",
    "no nodes": "id: g\nnodes: {}\n",
    "bad node name": "id: g\nnodes: {'9lives': {type: return}}\n",
    "tool and item_id": "id: g\nnodes: {a: {action: {tool: echo, item_id: echo}}}\n",
    "rye non-execute": "id: g\nnodes: {a: {action: {primary: load, item_id: echo}}}\n",
    "unknown field type": "id: g\nstate: {x: tuple}\nnodes: {a: {type: return}}\n",
    "retry unknown key": "id: g\nnodes: {a: {action: {tool: echo}, retry: {tries: 3}}}\n",
    "next unconditional with branches": (
        "id: g\nnodes: {a: {type: gate, next: {type: unconditional, to: b, branches: []}}, b: {type: return}}\n"
    ),
    "next unknown mapping": "id: g\nnodes: {a: {type: gate, next: {goto: b}}, b: {type: return}}\n",
    "reducer params and inline": (
        "id: g\nstate: {x: {reducer: {name: append, params: {}, max_len: 2}}}\nnodes: {a: {type: return}}\n"
    ),
    "action node without action": "id: g\nnodes: {a: {next: b}, b: {type: return}}\n",
}


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    """A validator for the generated schema (itself checked against the metaschema)."""
    schema = graph_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def document(text: str) -> Any:
    """YAML text to data, read the way graph files are read (YAML 1.2 booleans)."""
    return parse_yaml(textwrap.dedent(text).lstrip()).data


def model_accepts(data: Any) -> bool:
    """True when the graph model accepts `data` (with the file-name id the loader adds)."""
    try:
        GraphSpec.model_validate({"id": "from-file-name", **data})
    except ValidationError:
        return False
    return True


def example_graphs() -> list[Any]:
    """The inline examples and every graphrunner graph file in `graphs/` (a Rye graph tool in
    graphs/rye is another format, which the editor schema does not describe)."""
    files = sorted(
        p for p in [*GRAPHS_DIR.rglob("*.yaml"), *GRAPHS_DIR.rglob("*.yml")] if "rye" not in p.parts
    )
    inline = [pytest.param(text, id=name) for name, text in INLINE_VALID.items()]
    on_disk = [pytest.param(p.read_text(encoding="utf-8"), id=p.name) for p in files]
    return inline + on_disk


def test_schema_header() -> None:
    schema = graph_json_schema()
    assert schema["$schema"] == DIALECT == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == SCHEMA_ID == "https://graphrunner.dev/schema/graph.json"
    assert schema["title"]
    assert list(schema)[:3] == ["$schema", "$id", "title"]
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize("text", example_graphs())
def test_example_graphs_validate(validator: jsonschema.Draft202012Validator, text: str) -> None:
    data = document(text)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(data)]
    assert errors == []
    assert model_accepts(data)


@pytest.mark.parametrize("text", [pytest.param(t, id=k) for k, t in INVALID.items()])
def test_schema_rejects_what_the_model_rejects(validator: jsonschema.Draft202012Validator, text: str) -> None:
    data = document(text)
    assert not validator.is_valid(data)
    assert not model_accepts(data)


@pytest.mark.parametrize("name", ["rye", "shorthands"])
def test_the_raw_model_schema_would_reject_the_written_forms(name: str) -> None:
    raw = jsonschema.Draft202012Validator(GraphSpec.model_json_schema(by_alias=True))
    assert not raw.is_valid(document(INLINE_VALID[name]))


def test_wrong_node_type_is_located(validator: jsonschema.Draft202012Validator) -> None:
    error = jsonschema.exceptions.best_match(validator.iter_errors(document(INVALID["unknown node type"])))
    assert error is not None
    assert list(error.absolute_path)[:2] == ["nodes", "a"]


def test_schema_command_prints_json() -> None:
    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == graph_json_schema()
    assert result.stderr == ""


def test_schema_command_output_file(tmp_path: Path) -> None:
    target = tmp_path / "graph.schema.json"
    result = CliRunner().invoke(main, ["schema", "--output", str(target)])
    assert result.exit_code == 0
    assert result.stdout == ""
    assert json.loads(target.read_text(encoding="utf-8"))["$id"] == SCHEMA_ID


def test_schema_command_unwritable_output(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["schema", "-o", str(tmp_path / "no" / "such" / "dir.json")])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot write")
    assert "Traceback" not in result.stderr


def test_console_script() -> None:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        [sys.executable, "-m", "graphrunner", "schema"],
        capture_output=True,
        encoding="utf-8",
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["$schema"] == DIALECT

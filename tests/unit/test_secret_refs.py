"""Secret references found, replaced and masked (pgsched/secret_refs.py), and the rule that
an outcome marked not retryable ends its execution at once (pgsched/worker/outcome.py)."""

from __future__ import annotations

import json

import pytest

from pgsched.handlers import Outcome
from pgsched.secret_refs import (
    Masker,
    Reference,
    SecretUnresolved,
    mask_text,
    references,
    references_of,
    secret_variable,
    substitute,
    substitute_all,
)
from pgsched.worker.outcome import final_state

DB = Reference("db", "sales-db-url")


def test_references_alone_inside_text_and_by_provider():
    assert references("{{secret:sales-db-url}}") == [DB]
    assert references("postgresql://u:{{secret:pw}}@h/{{secret:env:DB_NAME}}") == [
        Reference("db", "pw"),
        Reference("env", "DB_NAME"),
    ]
    assert references("{{secret:file:api.token}}") == [Reference("file", "api.token")]
    assert references("no reference {{other}} {secret:x}") == []
    assert references_of(["{{secret:b}}", "{{secret:a}} {{secret:b}}"]) == [
        Reference("db", "a"),
        Reference("db", "b"),
    ]
    assert DB.text == "{{secret:sales-db-url}}"
    assert Reference("file", "x").text == "{{secret:file:x}}"


@pytest.mark.parametrize(
    "text",
    [
        "{{secret:}}",
        "{{secret:has space}}",
        "{{secret:file:/etc/shadow}}",
        "{{secret:file:../x}}",
        "{{secret:vault:x}}",
        "{{secret:x",
        "ok {{secret:a}} then {{secret:-bad}}",
    ],
)
def test_a_malformed_reference_is_an_error_naming_it(text):
    with pytest.raises(SecretUnresolved, match="is not a reference") as caught:
        references(text)
    assert caught.value.reference.startswith("{{secret:")
    assert caught.value.reference in text


def test_substitution_replaces_every_reference_in_strings_only():
    values = {DB: "postgres://x", Reference("env", "T"): "t0k"}
    assert substitute("a={{secret:sales-db-url}} b={{secret:env:T}}", values) == (
        "a=postgres://x b=t0k"
    )
    params = {"u": "{{secret:sales-db-url}}", "n": [1, {"t": "{{secret:env:T}}"}], "k": None}
    assert substitute_all(params, values) == {
        "u": "postgres://x",
        "n": [1, {"t": "t0k"}],
        "k": None,
    }
    assert params["u"] == "{{secret:sales-db-url}}"  # a copy: the row keeps its references


def test_the_masker_hides_the_value_its_lines_and_its_json_form():
    value = 'p"w\\1\nsecond-line'
    mask = Masker({DB: value})
    assert mask(f"x{value}y") == f"x{mask_text(DB)}y"
    assert mask("second-line alone") == f"{mask_text(DB)} alone"
    assert mask(json.dumps({"u": value})) == json.dumps({"u": mask_text(DB)})
    assert mask("nothing here") == "nothing here"
    outcome = mask.outcome(Outcome("failed", 1, f"boom {value}", result={value: [value, 3]}))
    assert outcome.error == f"boom {mask_text(DB)}"
    assert outcome.result == {mask_text(DB): [mask_text(DB), 3]}
    assert not Masker({}) and Masker({}).outcome(outcome) is outcome


def test_the_longer_value_is_masked_whole():
    short, long = Reference("db", "a"), Reference("db", "b")
    mask = Masker({short: "abc", long: "xxabcxx"})
    assert mask("xxabcxx abc") == f"{mask_text(long)} {mask_text(short)}"


def test_the_variables_about_secrets():
    for name in ("PGSCHED_SECRET_KEY", "PGSCHED_SECRET_KEY_FILE", "PGSCHED_SECRET_DIR"):
        assert secret_variable(name)
    assert secret_variable("PGSCHED_SECRET_ENV_TOKEN")
    assert not secret_variable("PGSCHED_PARAMS") and not secret_variable("SECRET")


def test_an_outcome_not_retryable_ends_in_the_dead_letter_queue_at_once():
    row = {"attempt": 1, "max_attempts": 5, "no_retry_exit_codes": [], "no_retry_exceptions": []}
    assert final_state(row, Outcome("failed", error="x"), stopped=False) is None
    assert final_state(row, Outcome("failed", error="x", retryable=False), stopped=False) == "dead"
    # a stopping worker's hand-back is run again whatever it says
    assert final_state(row, Outcome("failed", retryable=False), stopped=True) is None

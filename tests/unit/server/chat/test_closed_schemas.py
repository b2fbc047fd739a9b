"""A JSON Schema's objects that list their properties and say nothing of others are closed to
them (`additionalProperties: false`), as llama.cpp's grammar converter reads them, for tool
arguments and structured output alike (server/chat/structured.py). Pure logic, no daemon."""

from __future__ import annotations

from localserve.server.chat.structured import closed

PROPS = {"city": {"type": "string"}}


def test_an_object_with_properties_is_closed() -> None:
    assert closed({"type": "object", "properties": PROPS})["additionalProperties"] is False


def test_an_object_without_properties_stays_open() -> None:
    assert "additionalProperties" not in closed({"type": "object"})


def test_what_the_schema_says_of_other_properties_is_kept() -> None:
    for key, value in (
        ("additionalProperties", True),
        ("additionalProperties", {"type": "integer"}),
        ("patternProperties", {"^x": {}}),
        ("unevaluatedProperties", False),
    ):
        schema = closed({"type": "object", "properties": PROPS, key: value})
        assert schema[key] == value and (
            key == "additionalProperties" or "additionalProperties" not in schema
        )


def test_nested_objects_are_closed_wherever_they_are() -> None:
    inner = {"type": "object", "properties": PROPS}
    schema = closed(
        {
            "type": "object",
            "properties": {"a": inner, "b": {"type": "array", "items": inner}},
            "$defs": {"c": inner},
            "anyOf": [inner],
        }
    )
    for part in (
        schema["properties"]["a"],
        schema["properties"]["b"]["items"],
        schema["$defs"]["c"],
        schema["anyOf"][0],
    ):
        assert part["additionalProperties"] is False


def test_the_parts_of_an_all_of_stay_open_for_each_other() -> None:
    schema = closed({"allOf": [{"properties": PROPS}, {"properties": {"zone": {}}}]})
    assert all("additionalProperties" not in part for part in schema["allOf"])


def test_the_clients_schema_is_not_changed() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": PROPS}}}
    closed(schema)
    assert (
        "additionalProperties" not in schema
        and "additionalProperties" not in schema["properties"]["a"]
    )

"""The wire models' validators and serializers from core schemas built in an earlier process.

A worker builds, before its first effect, the validator of ``Hello``, of the ``Message``
union (every message model), of its request model and of ``Result``: generating those
pydantic schemas (and pydantic's first look for plugins, which scans every installed
distribution's metadata) is ~15 ms of CPU of a ~150 ms start; building the validators from the
schemas takes ~1 ms. The schemas are data: a worker or a coordinator's pool stores them once
(``mailbox/wirecache.py``) and hands them back here in later processes.

Invariants:
- pure: no I/O; the caller decides where schemas come from and whether they may be trusted;
- each validator installed here is built from the schema and the core config pydantic itself
  would use (a model's config titled with its name; the union's default config, as
  ``TypeAdapter`` builds it), so it accepts, rejects and reports exactly what a fresh build
  does;
- all or nothing: schemas that lack a model, or one that pydantic-core refuses, install
  nothing; a model already built keeps its own validator; the models stay "not complete",
  so anything else (their JSON Schema, a subclass) still builds the normal way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydantic import TypeAdapter
from pydantic._internal._config import ConfigWrapper
from pydantic_core import CoreSchema, SchemaSerializer, SchemaValidator

from agentctl.mailbox import frames, messages, requests
from agentctl.mailbox.messages import Message, WireModel

UNION = "Message"  # the key of the union's schema (no model has that name)


def _models() -> list[type[WireModel]]:
    """Every wire model: the messages, the request payloads and the models nested in them
    (a nested model's default is made by calling its class, which uses its own validator)."""
    found = []
    for module in (messages, requests):
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, WireModel)
                and value is not WireModel
                and value.__module__ == module.__name__
            ):
                found.append(value)
    return found


def wire_schemas() -> dict[str, CoreSchema]:
    """The core schema of every wire model and of the union, building them: the slow path
    (the models then validate with pydantic's own validators, the union too)."""
    schemas: dict[str, CoreSchema] = {}
    for model in _models():
        model.model_rebuild()
        schemas[model.__name__] = model.__pydantic_core_schema__
    adapter: TypeAdapter[Message] = TypeAdapter(Message)
    frames.use_message_validator(adapter.validator.validate_json)
    schemas[UNION] = adapter.core_schema
    return schemas


def use_prebuilt(schemas: Mapping[str, CoreSchema]) -> bool:
    """Validate and dump the wire models with ``schemas`` (from ``wire_schemas``); whether
    they were installed (module docstring: all or nothing)."""
    built: list[tuple[type[WireModel], SchemaValidator, SchemaSerializer]] = []
    try:
        for model in _models():
            config = ConfigWrapper(model.model_config, check=False).core_config(
                title=model.__name__
            )
            schema = schemas[model.__name__]
            built.append((model, SchemaValidator(schema, config), SchemaSerializer(schema, config)))
        union = SchemaValidator(schemas[UNION], ConfigWrapper(None).core_config(None))
    except Exception:  # a schema missing or refused: everything builds as usual
        return False
    for model, validator, serializer in built:
        if not model.__pydantic_complete__:
            model.__pydantic_validator__ = validator
            model.__pydantic_serializer__ = serializer
    decode: Callable[[bytes | bytearray], Message] = union.validate_json
    frames.use_message_validator(decode)
    return True

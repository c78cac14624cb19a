"""``Workflow``'s validator and serializer from a core schema built in an earlier process.

Generating the pydantic core schema of the workflow models (~50 classes, ~250 fields) is the
largest part of ``agentctl check``'s start-up; the schema itself is data, and pydantic-core
builds a validator from it in about a millisecond. The CLI stores the schema once
(``agentctl/cli_schemacache.py``) and hands it back here in later processes.

Invariants:
- pure: no I/O; the caller decides where a schema comes from and whether it may be trusted;
- a validator installed here is built from the same schema and the same core config as
  pydantic's own, so it accepts, rejects and reports exactly what a freshly built model does;
- only ``Workflow``'s validator and serializer are replaced, and only while the model is not
  yet built; the model stays "not complete", so anything else (the JSON Schema, a nested model
  used on its own) still builds from the classes the normal way.
"""

from __future__ import annotations

from pydantic._internal._config import ConfigWrapper
from pydantic_core import CoreSchema, SchemaSerializer, SchemaValidator

from agentctl.core.dsl.workflow import Workflow


def workflow_schema() -> CoreSchema:
    """``Workflow``'s core schema, building the models if that was not done yet."""
    Workflow.model_rebuild()  # a no-op once built; until then the attribute is a stand-in
    return Workflow.__pydantic_core_schema__


def is_built() -> bool:
    """Whether ``Workflow`` already validates (built here or by pydantic)."""
    return Workflow.__pydantic_complete__ or isinstance(
        Workflow.__pydantic_validator__, SchemaValidator
    )


def use_prebuilt(schema: CoreSchema) -> None:
    """Validate and dump ``Workflow`` documents with ``schema`` (from ``workflow_schema``)."""
    if is_built():
        return
    config = ConfigWrapper(Workflow.model_config, check=False).core_config(title="Workflow")
    Workflow.__pydantic_validator__ = SchemaValidator(schema, config)
    Workflow.__pydantic_serializer__ = SchemaSerializer(schema, config)

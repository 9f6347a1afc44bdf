"""__NAME__: a Gantry reconcile plugin in Python.

A parent with `spec.who` wants a ConfigMap `<name>-greeting` whose `message`
is "<config.greeting>, <spec.who>!". componentize-py builds this module
against the `reconciler` world in wit/gantry.wit; `wit_world` is generated
from it. JSON crosses the boundary as strings; errors are raised as `Err`.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.reconcile import (
    Condition,
    ConditionStatus,
    PluginError,
    Request,
    Response,
)


class Reconcile(exports.Reconcile):
    """The `reconcile` interface."""

    def reconcile(self, request: Request) -> Response:
        if request.finalizing:
            return Response([], None, [], [], None, True)
        parent = json.loads(request.parent)
        config = json.loads(request.config) or {}
        who = (parent.get("spec") or {}).get("who")
        if not isinstance(who, str):
            raise Err(PluginError("spec.who must be a string", "InvalidInput", False))
        name = parent["metadata"]["name"]
        greeting = config.get("greeting") or "Hello"
        message = f"{greeting}, {who}!"
        child_name = f"{name}-greeting"
        child = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": child_name},
            "data": {"message": message},
        }
        condition = Condition(
            "Greeted",
            ConditionStatus.TRUE,
            "ConfigMapWritten",
            f"{child_name} says {message}",
        )
        return Response(
            [json.dumps(child)], json.dumps({"message": message}), [condition], [], None, False
        )


class Config(exports.Config):
    """The `config` interface: check a binding's config."""

    def validate_config(self, config: str) -> None:
        value = json.loads(config)
        if value is None:
            return
        if not isinstance(value, dict):
            raise Err("invalid config: expected a map")
        for key in value:
            if key != "greeting":
                raise Err(f"invalid config: unknown field `{key}`")
        greeting = value.get("greeting")
        if greeting is not None and (not isinstance(greeting, str) or not greeting.strip()):
            raise Err("config.greeting must not be empty")

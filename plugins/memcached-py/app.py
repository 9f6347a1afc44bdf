"""The kubebuilder tutorial's Memcached operator as a Gantry plugin, in
Python: the same logic as the Rust plugin in plugins/memcached, with the same
answers and error messages.

A `Memcached` (spec.size, spec.containerPort) becomes a Deployment of
memcached with that many replicas. Status reports the ready replicas of the
observed Deployment and an `Available` condition.

Config (all optional): `image` (default `memcached:1.6.26-alpine`).
"""

import json
import re
from typing import Any

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.reconcile import (
    Condition,
    ConditionStatus,
    Event,
    EventType,
    PluginError,
    Request,
    Response,
)

DEFAULT_IMAGE = "memcached:1.6.26-alpine"
"""Image used when the binding's config names none."""

I32_MIN, I32_MAX = -(2**31), 2**31 - 1
BLANK = re.compile(
    "[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*"
)
"""Unicode white space, as Rust's `str::trim` strips it."""


class Invalid(Exception):
    """A value that does not deserialize; the message is serde's."""


class Reconcile(exports.Reconcile):
    """The `reconcile` interface of the `reconciler` world."""

    def reconcile(self, request: Request) -> Response:
        parent, observed, config_value = parse_request(request)
        if request.finalizing:
            return Response([], None, [], [], None, True)
        try:
            config = parse_config({} if config_value is None else config_value)
        except Invalid as e:
            raise invalid_input(f"invalid config: {e}")
        try:
            spec = parse_spec(get(parent, "spec", {}))
        except Invalid as e:
            raise invalid_input(f"invalid spec: {e}")
        size = spec["size"]
        if not 1 <= size <= 10:
            raise Err(
                PluginError(
                    f"spec.size must be between 1 and 10, got {size}", "InvalidSpec", False
                )
            )
        name = get(get(parent, "metadata"), "name")
        if not isinstance(name, str):
            raise invalid_input("parent has no metadata.name")
        image = DEFAULT_IMAGE if config.get("image") is None else config["image"]
        child = deployment(name, spec, image)

        found = observed_deployment(observed, name)
        ready = found.get("readyReplicas") or 0
        current = found.get("replicas")
        available = ready >= size
        events = []
        if current is not None and current != size:
            events.append(
                Event(
                    EventType.NORMAL,
                    "Scaling",
                    f"scaling memcached from {current} to {size} replicas",
                )
            )
        condition = Condition(
            "Available",
            ConditionStatus.TRUE if available else ConditionStatus.FALSE,
            "DeploymentReady" if available else "Scaling",
            f"{ready}/{size} replicas ready",
        )
        return Response(
            [to_json(child)],
            to_json({"readyReplicas": ready}),
            [condition],
            events,
            None,
            False,
        )


class Config(exports.Config):
    """The `config` interface: check a binding's config."""

    def validate_config(self, config: str) -> None:
        try:
            value = json.loads(config)
        except ValueError as e:
            raise Err(f"config is not valid JSON: {e}")
        if value is None:
            return
        try:
            parsed = parse_config(value)
        except Invalid as e:
            raise Err(f"invalid config: {e}")
        image = parsed.get("image")
        if image is not None and BLANK.fullmatch(image):
            raise Err("config.image must not be empty")


def invalid_input(message: str) -> Err:
    return Err(PluginError(message, "InvalidInput", False))


def to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def parse_request(request: Request) -> tuple[Any, list[Any], Any]:
    """The request's JSON fields parsed, in the Rust SDK's order."""

    def parse(what: str, text: str) -> Any:
        try:
            return json.loads(text)
        except ValueError as e:
            raise invalid_input(f"{what} is not valid JSON: {e}")

    parent = parse("parent", request.parent)
    observed = [parse("observed object", o) for o in request.observed]
    for o in request.related:
        parse("related object", o)
    return parent, observed, parse("config", request.config)


def get(value: Any, key: str, default: Any = None) -> Any:
    """`value[key]` when `value` is a JSON object, else `default`."""
    if isinstance(value, dict):
        return value.get(key, default)
    return default


# Deserialization with serde's rules and messages, for the few types the
# plugin reads.


def unexpected(value: Any) -> str:
    """How serde names a JSON value it did not expect."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value!r}`"
    if isinstance(value, str):
        return f"string {json.dumps(value, ensure_ascii=False)}"
    return "sequence" if isinstance(value, list) else "map"


def invalid_type(value: Any, expected: str) -> Invalid:
    return Invalid(f"invalid type: {unexpected(value)}, expected {expected}")


def i32(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if not I32_MIN <= value <= I32_MAX:
            raise Invalid(f"invalid value: integer `{value}`, expected i32")
        return value
    raise invalid_type(value, "i32")


def optional_string(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise invalid_type(value, "a string")


def parse_spec(value: Any) -> dict[str, int]:
    """`MemcachedSpec` (size default 1, containerPort default 11211)."""
    spec = {"size": 1, "containerPort": 11211}
    fields = ["size", "containerPort"]
    if isinstance(value, list):
        if len(value) > len(fields):
            raise Invalid(f"invalid length {len(value)}, expected fewer elements in array")
        for field, item in zip(fields, value):
            spec[field] = i32(item)
        return spec
    if not isinstance(value, dict):
        raise invalid_type(value, "struct MemcachedSpec")
    for key, item in value.items():
        if key in fields:
            spec[key] = i32(item)
    return spec


def parse_config(value: Any) -> dict[str, Any]:
    """The binding's `Config` (unknown fields rejected)."""
    if isinstance(value, list):
        if not value:
            raise Invalid("invalid length 0, expected struct Config with 1 element")
        if len(value) > 1:
            raise Invalid(f"invalid length {len(value)}, expected fewer elements in array")
        return {"image": optional_string(value[0])}
    if not isinstance(value, dict):
        raise invalid_type(value, "struct Config")
    config: dict[str, Any] = {}
    for key, item in value.items():
        if key != "image":
            raise Invalid(f"unknown field `{key}`, expected `image`")
        config["image"] = optional_string(item)
    return config


def observed_deployment(observed: list[Any], name: str) -> dict[str, int | None]:
    """`replicas` and `readyReplicas` of the observed Deployment named `name`
    (empty when there is none); raises when it does not deserialize."""
    found = next(
        (
            o
            for o in observed
            if get(o, "apiVersion") == "apps/v1"
            and get(o, "kind") == "Deployment"
            and get(get(o, "metadata"), "name") == name
        ),
        None,
    )
    if found is None:
        return {}
    try:
        result: dict[str, int | None] = {}
        spec = found.get("spec")
        if spec is not None:
            if not isinstance(spec, dict):
                raise invalid_type(spec, "DeploymentSpec")
            if spec.get("replicas") is not None:
                result["replicas"] = i32(spec["replicas"])
            for required in ("selector", "template"):
                if required not in spec:
                    raise Invalid(f"missing field `{required}`")
        status = found.get("status")
        if status is not None:
            if not isinstance(status, dict):
                raise invalid_type(status, "DeploymentStatus")
            if status.get("readyReplicas") is not None:
                result["readyReplicas"] = i32(status["readyReplicas"])
        return result
    except Invalid as e:
        raise invalid_input(f"observed Deployment {name} does not deserialize: {e}")


def deployment(name: str, spec: dict[str, int], image: str) -> dict[str, Any]:
    """The Deployment a Memcached wants."""

    def labels() -> dict[str, str]:
        return {"app.kubernetes.io/instance": name, "app.kubernetes.io/name": "memcached"}

    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"labels": labels(), "name": name},
        "spec": {
            "replicas": spec["size"],
            "selector": {"matchLabels": labels()},
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    "containers": [
                        {
                            "command": ["memcached", "--memory-limit=64", "-o", "modern", "-v"],
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "name": "memcached",
                            "ports": [
                                {
                                    "containerPort": spec["containerPort"],
                                    "name": "memcached",
                                    "protocol": "TCP",
                                }
                            ],
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                                "runAsNonRoot": True,
                                "runAsUser": 1001,
                            },
                        }
                    ],
                    "securityContext": {
                        "runAsNonRoot": True,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                },
            },
        },
    }

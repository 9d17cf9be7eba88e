#!/usr/bin/env python3
"""Checks that infra/template.yaml agrees with the code's configuration.

Usage: python3 scripts/check_template.py [--template FILE] [SOURCE.rs ...]

SOURCE files are the Rust files that name the configuration variables; by default
src/config/mod.rs (required), src/secrets.rs (the core's <NAME>_PARAM variables),
src/covers/config.rs (where covers are hosted), the config.rs
of every network the registry in src/networks/mod.rs lists (its variables and <NAME>_PARAM
names), and the store registry src/stores/mod.rs with each store's src/stores/<backend>/config.rs. The allowed variable names are the string literals of the form "[A-Z][A-Z0-9_]+" in
them.

Checks, one line each (✓ or ✗), exit status 1 when any fails:
- the function's Timeout equals POSTONCE_FUNCTION_TIMEOUT_S;
- POSTONCE_CLAIM_TTL_S is greater than the Timeout (a claim must outlive its run);
- every environment variable the template sets is a name the code reads;
- each *_PARAM variable's SSM parameter may be read by the function's role (and nothing else);
- the table's key schema and TTL attribute are the ones the code uses;
- the LinkedInVersion default equals DEFAULT_VERSION in src/networks/linkedin/config.rs.
Only PyYAML is needed.
"""

import argparse
import os
import re
import sys

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.exit("check_template.py needs PyYAML: pip install pyyaml")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME_LITERAL = re.compile(r'"([A-Z][A-Z0-9_]+)"')
# One registry line: `Variant = "target" => folder,`
REGISTRY_LINE = re.compile(r'^\s*([A-Z][A-Za-z0-9]*)\s*=\s*"([a-z0-9_]+)"\s*=>\s*([a-z0-9_]+)\s*,', re.M)


def network_folders():
    """The folders of the networks the registry (src/networks/mod.rs) lists."""
    registry = os.path.join(ROOT, "src", "networks", "mod.rs")
    if not os.path.isfile(registry):
        return []
    with open(registry, encoding="utf-8") as f:
        return [folder for _, _, folder in REGISTRY_LINE.findall(f.read())]


class CfnLoader(yaml.SafeLoader):
    """A safe loader that reads CloudFormation's short tags (!Ref, !Sub, !GetAtt, !If, ...)
    as their long forms ({"Ref": ...}, {"Fn::Sub": ...})."""


def _construct_cfn_tag(loader, tag_suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if tag_suffix == "Ref":
        return {"Ref": value}
    if tag_suffix == "Condition":
        return {"Condition": value}
    if tag_suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {"Fn::" + tag_suffix: value}


CfnLoader.add_multi_constructor("!", _construct_cfn_tag)


def load_template(path):
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=CfnLoader)  # noqa: S506 - CfnLoader is a SafeLoader


class Report:
    def __init__(self):
        self.failed = 0

    def check(self, ok, what, detail=""):
        mark = "✓" if ok else "✗"
        print(f"{mark} {what}" + (f": {detail}" if detail else ""))
        if not ok:
            self.failed += 1
        return ok


def find_function(resources):
    functions = [
        (name, r)
        for name, r in resources.items()
        if r.get("Type") in ("AWS::Serverless::Function", "AWS::Lambda::Function")
    ]
    if len(functions) != 1:
        return None, None
    return functions[0]


def as_int(value):
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def walk(node):
    """Yields every value in a nested structure."""
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


def ssm_resources(resources):
    """Resource expressions of the IAM statements that allow an ssm: action."""
    found = []
    for r in resources.values():
        if r.get("Type") not in ("AWS::IAM::Role", "AWS::IAM::Policy", "AWS::Serverless::Function"):
            continue
        for node in walk(r.get("Properties", {})):
            if not (isinstance(node, dict) and "Action" in node and "Resource" in node):
                continue
            actions = node["Action"] if isinstance(node["Action"], list) else [node["Action"]]
            if any(isinstance(a, str) and a.startswith("ssm:") for a in actions):
                res = node["Resource"] if isinstance(node["Resource"], list) else [node["Resource"]]
                found.extend(res)
    return found


def dynamodb_actions(resources):
    """Every dynamodb: action an IAM statement of the template allows."""
    found = set()
    for r in resources.values():
        if r.get("Type") not in ("AWS::IAM::Role", "AWS::IAM::Policy", "AWS::Serverless::Function"):
            continue
        for node in walk(r.get("Properties", {})):
            if isinstance(node, dict) and "Action" in node:
                actions = node["Action"] if isinstance(node["Action"], list) else [node["Action"]]
                found.update(a.split(":", 1)[1] for a in actions
                             if isinstance(a, str) and a.startswith("dynamodb:"))
    return found


# What a call in the DynamoDB store needs from IAM. A transaction is authorized by its parts.
# Calls made only by `postonce table create` (local servers) are not listed.
STORE_CALLS = {
    ".get_item()": "GetItem",
    ".batch_get_item()": "BatchGetItem",
    ".update_item()": "UpdateItem",
    "Update::builder()": "UpdateItem",
    "Put::builder()": "PutItem",
    ".put_item()": "PutItem",
    "ConditionCheck::builder()": "ConditionCheckItem",
    ".query()": "Query",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--template", default=os.path.join(ROOT, "infra", "template.yaml"))
    parser.add_argument("sources", nargs="*", help="Rust files naming the variables (default src/config/mod.rs, src/secrets.rs, src/covers/config.rs, each network's and each store's config.rs)")
    args = parser.parse_args()

    sources = args.sources
    if not sources:
        config_rs = os.path.join(ROOT, "src", "config", "mod.rs")
        if not os.path.isfile(config_rs):
            config_rs = os.path.join(ROOT, "src", "config.rs")
        if not os.path.isfile(config_rs):
            print(f"✗ {config_rs} does not exist: the allowed variable names are read from it (or pass the files to read)")
            return 1
        sources = [config_rs]
        secrets_rs = os.path.join(ROOT, "src", "secrets.rs")
        if os.path.isfile(secrets_rs):
            sources.append(secrets_rs)
        covers_rs = os.path.join(ROOT, "src", "covers", "config.rs")
        if os.path.isfile(covers_rs):
            sources.append(covers_rs)
        for folder in network_folders():
            sources.append(os.path.join(ROOT, "src", "networks", folder, "config.rs"))
        # Each store reads its own variables in its folder (src/stores/<backend>/config.rs).
        stores = os.path.join(ROOT, "src", "stores")
        if os.path.isdir(stores):
            for folder in sorted(os.listdir(stores)):
                store_config = os.path.join(stores, folder, "config.rs")
                if os.path.isfile(store_config):
                    sources.append(store_config)
            if os.path.isfile(os.path.join(stores, "mod.rs")):
                sources.append(os.path.join(stores, "mod.rs"))
    allowed = set()
    source_text = {}
    for path in sources:
        if not os.path.isfile(path):
            print(f"✗ {path} does not exist: the allowed variable names are read from it")
            return 1
        with open(path, encoding="utf-8") as f:
            source_text[path] = f.read()
        allowed.update(NAME_LITERAL.findall(source_text[path]))

    report = Report()
    try:
        template = load_template(args.template)
    except (OSError, yaml.YAMLError) as e:
        report.check(False, f"template {args.template} parses", str(e))
        return 1
    resources = template.get("Resources") or {}
    parameters = template.get("Parameters") or {}
    name, function = find_function(resources)
    if not report.check(function is not None, "the template has exactly one function", name or "found none or several"):
        return 1
    props = function.get("Properties", {})
    env = (props.get("Environment") or {}).get("Variables") or {}

    timeout = as_int(props.get("Timeout"))
    fn_timeout = as_int(env.get("POSTONCE_FUNCTION_TIMEOUT_S"))
    claim_ttl = as_int(env.get("POSTONCE_CLAIM_TTL_S"))
    report.check(
        timeout is not None and timeout == fn_timeout,
        "Timeout equals POSTONCE_FUNCTION_TIMEOUT_S",
        f"Timeout {props.get('Timeout')!r}, POSTONCE_FUNCTION_TIMEOUT_S {env.get('POSTONCE_FUNCTION_TIMEOUT_S')!r}",
    )
    report.check(
        timeout is not None and claim_ttl is not None and claim_ttl > timeout,
        "POSTONCE_CLAIM_TTL_S exceeds the Timeout",
        f"POSTONCE_CLAIM_TTL_S {env.get('POSTONCE_CLAIM_TTL_S')!r}, Timeout {props.get('Timeout')!r}",
    )

    unknown = sorted(set(env) - allowed)
    report.check(
        not unknown and bool(env),
        "every environment variable is one the code reads",
        (f"not named in {', '.join(os.path.relpath(p, ROOT) for p in sources)}: {', '.join(unknown)}" if unknown
         else f"{len(env)} variables, all named in the code"),
    )

    # Each *_PARAM variable should be a !Ref to a parameter whose ARN the role may read.
    readable = ssm_resources(resources)
    readable_text = repr(readable)
    for var in sorted(v for v in env if v.endswith("_PARAM")):
        value = env[var]
        param = value.get("Ref") if isinstance(value, dict) else None
        ok = param in parameters and ("${" + param + "}") in readable_text
        report.check(ok, f"{var} names a parameter the role may read", f"!Ref {param}" if param else repr(value))
    for res in readable:
        text = repr(res)
        refs = re.findall(r"\$\{([A-Za-z0-9]+)\}", text)
        named = [r for r in refs if r in parameters]
        ok = "parameter${" in text and bool(named) and "*" not in text
        report.check(ok, "ssm access is limited to one named parameter", text if not ok else f"${{{named[0]}}}")

    tables = [r for r in resources.values() if r.get("Type") == "AWS::DynamoDB::Table"]
    if report.check(len(tables) == 1, "the template has one DynamoDB table"):
        table = tables[0]
        tp = table.get("Properties", {})
        due = [i for i in tp.get("GlobalSecondaryIndexes", []) if i.get("IndexName") == "due"]
        report.check(
            len(due) == 1
            and due[0].get("KeySchema") == [
                {"AttributeName": "queue", "KeyType": "HASH"},
                {"AttributeName": "due_at", "KeyType": "RANGE"},
            ]
            and due[0].get("Projection", {}).get("ProjectionType") == "ALL",
            "the table has the due index (queue S HASH, due_at N RANGE, all attributes): the sweeper queries it",
            repr(tp.get("GlobalSecondaryIndexes")),
        )
        report.check(
            tp.get("KeySchema") == [{"AttributeName": "pk", "KeyType": "HASH"}]
            and sorted(tp.get("AttributeDefinitions", []), key=lambda a: a["AttributeName"])
            == [
                {"AttributeName": "due_at", "AttributeType": "N"},
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "queue", "AttributeType": "S"},
            ],
            "the table's key is pk (S, HASH)",
        )
        ttl = tp.get("TimeToLiveSpecification") or {}
        report.check(
            ttl.get("AttributeName") == "expires_at" and ttl.get("Enabled") is True,
            "the table's TTL attribute is expires_at",
        )
        report.check(
            table.get("DeletionPolicy") == "Retain" and table.get("UpdateReplacePolicy") == "Retain",
            "the table is retained on delete and replace",
        )

    store_dir = os.path.join(ROOT, "src", "stores", "dynamodb")
    if os.path.isdir(store_dir):
        store = "".join(
            open(os.path.join(store_dir, f), encoding="utf-8").read()
            for f in sorted(os.listdir(store_dir)) if f.endswith(".rs"))
        granted = dynamodb_actions(resources)
        for call, action in sorted(STORE_CALLS.items()):
            if call in store:
                report.check(action in granted,
                             f"the function may call dynamodb:{action} (src/stores/dynamodb/ uses {call})")

    config_text = "".join(t for p, t in source_text.items() if p.endswith(os.path.join("linkedin", "config.rs")))
    m = re.search(r'DEFAULT_VERSION\s*:\s*&str\s*=\s*"(\d{6})"', config_text)
    version_param = (env.get("LINKEDIN_VERSION") or {}).get("Ref") if isinstance(env.get("LINKEDIN_VERSION"), dict) else None
    if m and version_param in parameters:
        default = str(parameters[version_param].get("Default", ""))
        report.check(
            default == m.group(1),
            f"{version_param} default equals LinkedIn's DEFAULT_VERSION",
            f"template {default!r}, code {m.group(1)!r}",
        )

    print(f"{'template checks failed' if report.failed else 'template checks passed'}: {args.template}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The benchmark's Python peer: a handler made idempotent by Powertools for AWS Lambda
(`idempotent` + `DynamoDBPersistenceLayer`), as a Lambda function would use it.

Protocol (the bare client's): prints `ready` once its clients are built, then reads one line
per run on stdin, `new <key>` or `posted <key>`, calls the handler with the event
{"key": <key>} and answers `ok posted` (the handler ran) or `ok already_posted` (Powertools
returned the stored response). The first word is not used: what happens is Powertools' call.

  python powertools_peer.py               the worker
  python powertools_peer.py --once KEY    one new-key run, then exit (the cold run)
  python powertools_peer.py --create-table

Configuration: PEER_TABLE (partition key `id`, a string), AWS_ENDPOINT_URL_DYNAMODB,
AWS_REGION, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
"""
import os
import sys
import time

import boto3
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent,
)


def env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"powertools peer: {name} is not set")
    return value


TABLE = env("PEER_TABLE")
CLIENT = boto3.client("dynamodb", endpoint_url=env("AWS_ENDPOINT_URL_DYNAMODB"),
                      region_name=os.environ.get("AWS_REGION", "us-east-1"))


class Context:
    """The part of a Lambda context Powertools reads: the time left, for the in-progress expiry."""

    function_name = "powertools-peer"

    @staticmethod
    def get_remaining_time_in_millis():
        return 30_000


RAN = [False]


@idempotent(persistence_store=DynamoDBPersistenceLayer(table_name=TABLE, boto3_client=CLIENT),
            config=IdempotencyConfig(event_key_jmespath="key", raise_on_no_idempotency_key=True))
def handler(event, context):
    RAN[0] = True
    return {"posted": event["key"], "at": int(time.time())}


def run(key):
    RAN[0] = False
    handler({"key": key}, Context())
    return "ok posted" if RAN[0] else "ok already_posted"


def create_table():
    try:
        CLIENT.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}])
    except CLIENT.exceptions.ResourceInUseException:
        pass
    CLIENT.get_waiter("table_exists").wait(TableName=TABLE)


def main():
    args = sys.argv[1:]
    if args == ["--create-table"]:
        create_table()
    elif len(args) == 2 and args[0] == "--once":
        print(run(args[1]), flush=True)
    elif not args:
        print("ready", flush=True)
        for line in sys.stdin:
            words = line.split()
            if len(words) != 2 or words[0] not in ("new", "posted"):
                sys.exit(f"powertools peer: expected `new <key>` or `posted <key>`, got {line!r}")
            print(run(words[1]), flush=True)
    else:
        sys.exit("usage: powertools_peer.py [--once KEY | --create-table]")


if __name__ == "__main__":
    main()

'use strict';
// The benchmark's Node peer: the seed design. Per run: claim the key in Redis
// (SET claim:<key> <token> NX EX 120), read the record posted:<key> in DynamoDB (consistent
// GetItem); if it is absent, write it (PutItem, attribute_not_exists(pk)) where the post would
// be made; then release the claim if it is still ours (a Lua compare-and-delete, EVALSHA).
//
// Protocol (the bare client's): prints `ready` once Redis is connected, then reads one line per
// run on stdin, `new <key>` or `posted <key>`, and answers `ok posted`, `ok already_posted` or
// `ok busy` (someone else holds the claim). The first word is not used.
//
//   node seed.js                 the worker
//   node seed.js --once KEY      one run, then exit (the cold run)
//   node seed.js --create-table
//
// Configuration: PEER_TABLE (partition key `pk`, a string), REDIS_URL,
// AWS_ENDPOINT_URL_DYNAMODB, AWS_REGION, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.

const crypto = require('node:crypto');
const readline = require('node:readline');
const { createClient, defineScript } = require('redis');
const {
  DynamoDBClient, GetItemCommand, PutItemCommand, CreateTableCommand, waitUntilTableExists,
} = require('@aws-sdk/client-dynamodb');

function env(name) {
  const value = process.env[name];
  if (!value) fail(`${name} is not set`);
  return value;
}

function fail(message) {
  process.stderr.write(`seed peer: ${message}\n`);
  process.exit(1);
}

const TABLE = env('PEER_TABLE');
const ddb = new DynamoDBClient({
  endpoint: env('AWS_ENDPOINT_URL_DYNAMODB'),
  region: process.env.AWS_REGION || 'us-east-1',
});

const release = defineScript({
  NUMBER_OF_KEYS: 1,
  SCRIPT: "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
  transformArguments: (key, token) => [key, token],
  transformReply: (reply) => reply,
});

async function connectRedis() {
  const redis = createClient({ url: env('REDIS_URL'), scripts: { release } });
  redis.on('error', (e) => fail(`redis: ${e.message}`));
  await redis.connect();
  return redis;
}

async function run(redis, key) {
  const claim = `claim:${key}`;
  const token = crypto.randomUUID();
  if ((await redis.set(claim, token, { NX: true, EX: 120 })) !== 'OK') return 'busy';
  try {
    const pk = { S: `posted:${key}` };
    const got = await ddb.send(new GetItemCommand({ TableName: TABLE, Key: { pk }, ConsistentRead: true }));
    if (got.Item) return 'already_posted';
    // The post itself would be made here.
    try {
      await ddb.send(new PutItemCommand({
        TableName: TABLE,
        Item: { pk, posted_at: { N: String(Date.now()) } },
        ConditionExpression: 'attribute_not_exists(pk)',
      }));
    } catch (e) {
      if (e.name === 'ConditionalCheckFailedException') return 'already_posted';
      throw e;
    }
    return 'posted';
  } finally {
    await redis.release(claim, token);
  }
}

async function createTable() {
  try {
    await ddb.send(new CreateTableCommand({
      TableName: TABLE,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
    }));
  } catch (e) {
    if (e.name !== 'ResourceInUseException') throw e;
  }
  await waitUntilTableExists({ client: ddb, maxWaitTime: 60 }, { TableName: TABLE });
}

async function main() {
  const args = process.argv.slice(2);
  if (args.length === 1 && args[0] === '--create-table') {
    await createTable();
  } else if (args.length === 2 && args[0] === '--once') {
    const redis = await connectRedis();
    process.stdout.write(`ok ${await run(redis, args[1])}\n`);
    await redis.disconnect();
  } else if (args.length === 0) {
    const redis = await connectRedis();
    process.stdout.write('ready\n');
    for await (const line of readline.createInterface({ input: process.stdin })) {
      const words = line.trim().split(/\s+/);
      if (words.length !== 2 || !['new', 'posted'].includes(words[0])) {
        fail(`expected \`new <key>\` or \`posted <key>\`, got ${JSON.stringify(line)}`);
      }
      process.stdout.write(`ok ${await run(redis, words[1])}\n`);
    }
    await redis.disconnect();
  } else {
    fail('usage: node seed.js [--once KEY | --create-table]');
  }
  ddb.destroy();
}

main().catch((e) => fail(e.stack || String(e)));

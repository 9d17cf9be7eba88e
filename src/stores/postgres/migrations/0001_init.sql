-- postonce schema version 1: records, drafts (with the due index), the caption index, pacing,
-- claims, and opaque per-network secrets (e.g. a kept session). `ns` is the namespace: '' for
-- real runs, 'dryrun:' for the dry-run publisher's, so a dry run never stops a real post.

CREATE TABLE postonce_records (
    ns           text   NOT NULL,
    key          text   NOT NULL,
    urn          text,
    posted_at    bigint NOT NULL,
    run          text   NOT NULL,
    source       text   NOT NULL,
    caption_hash text,
    url          text,
    cid          text,
    PRIMARY KEY (ns, key)
);

CREATE TABLE postonce_drafts (
    ns            text    NOT NULL,
    key           text    NOT NULL,
    caption       text,
    image         text,
    link          text,
    alt           text,
    status        text    NOT NULL,
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text,
    retryable     boolean NOT NULL DEFAULT true,
    next_retry_at bigint,
    -- The kept create-post request (PendingPost as JSON) and its run, for conditions.
    pending       jsonb,
    pending_run   text,
    reminded      boolean NOT NULL DEFAULT false,
    source        text,
    created_at    bigint  NOT NULL,
    updated_at    bigint  NOT NULL,
    expires_at    bigint,
    publish_at    bigint,
    -- The due index: set while the draft is open, NULL once done (posted, cancelled).
    due_at        bigint,
    delay_told    boolean NOT NULL DEFAULT false,
    -- The record's copy a posted draft keeps (PostedRecord as JSON).
    record        jsonb,
    PRIMARY KEY (ns, key)
);

CREATE INDEX postonce_drafts_due ON postonce_drafts (ns, status, due_at)
    WHERE due_at IS NOT NULL;

-- Posted drafts expire (as DynamoDB's TTL removes them); their records never do.
CREATE INDEX postonce_drafts_expiry ON postonce_drafts (expires_at)
    WHERE expires_at IS NOT NULL;

CREATE TABLE postonce_captions (
    ns   text NOT NULL,
    hash text NOT NULL,
    key  text NOT NULL,
    urn  text,
    PRIMARY KEY (ns, hash)
);

CREATE TABLE postonce_pace (
    ns      text   NOT NULL,
    network text   NOT NULL,
    last_ms bigint NOT NULL,
    PRIMARY KEY (ns, network)
);

-- Claims, with the database's clock: a row whose expires_at has passed is absent.
CREATE TABLE postonce_claims (
    name       text        PRIMARY KEY,
    value      text        NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE INDEX postonce_claims_expiry ON postonce_claims (expires_at);

-- Opaque secrets kept per name (e.g. a network's session), for stores that need them.
CREATE TABLE postonce_secrets (
    ns         text   NOT NULL,
    name       text   NOT NULL,
    value      bytea  NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (ns, name)
);

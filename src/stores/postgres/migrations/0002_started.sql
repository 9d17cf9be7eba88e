-- postonce schema version 2 (issue 30, finding 3): a draft's `started` mark, set by the write
-- that starts an attempt and cleared by the writes that end one; still set once no run can be
-- live, it counts a run that died without a word as an attempt.

ALTER TABLE postonce_drafts ADD COLUMN started integer NOT NULL DEFAULT 0;

-- PostgreSQL text of 0001_runs.sql: the same tables and columns. BIGINT for SQLite's INTEGER,
-- DOUBLE PRECISION for REAL; the foreign keys are DEFERRABLE INITIALLY DEFERRED because a
-- run's modules and tensors are written before its runs row (whose totals and checksum need
-- all of them), as SQLite's PRAGMA defer_foreign_keys allows there.
CREATE TABLE runs (
    id               BIGINT  PRIMARY KEY,
    content_hash     TEXT    NOT NULL UNIQUE,
    model_name       TEXT    NOT NULL,
    label            TEXT,
    step             BIGINT,
    tags             TEXT    NOT NULL DEFAULT '[]',
    root_class       TEXT    NOT NULL,
    source_kind      TEXT    NOT NULL,
    source_path      TEXT,
    model_type       TEXT,
    text_config_key  TEXT,
    dtype            TEXT,
    schema_version   BIGINT  NOT NULL,
    created_at       TEXT    NOT NULL,
    ingested_at      TEXT    NOT NULL,
    source_file      TEXT,
    total_params     BIGINT  NOT NULL,
    trainable_params BIGINT  NOT NULL,
    total_bytes      BIGINT  NOT NULL,
    num_modules      BIGINT  NOT NULL,
    has_stats        BIGINT  NOT NULL,
    has_trace        BIGINT  NOT NULL,
    config           TEXT,
    framework        TEXT    NOT NULL
);
CREATE INDEX runs_model_label_step ON runs (model_name, label, step);

CREATE TABLE modules (
    run_id     BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    idx        BIGINT NOT NULL,
    name       TEXT   NOT NULL,
    class      TEXT   NOT NULL,
    py_module  TEXT   NOT NULL,
    parent_idx BIGINT,
    PRIMARY KEY (run_id, idx)
);

CREATE TABLE tensors (
    run_id         BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    module_idx     BIGINT NOT NULL,
    kind           TEXT   NOT NULL CHECK (kind IN ('param', 'buffer')),
    pos            BIGINT NOT NULL,
    name           TEXT   NOT NULL,
    shape          TEXT,
    dtype          TEXT   NOT NULL,
    numel          BIGINT NOT NULL,
    device         TEXT   NOT NULL,
    tied_to        TEXT,
    requires_grad  BIGINT,
    lazy           BIGINT,
    expert_axis    BIGINT,
    persistent     BIGINT,
    stat_mean      DOUBLE PRECISION,
    stat_std       DOUBLE PRECISION,
    stat_min       DOUBLE PRECISION,
    stat_max       DOUBLE PRECISION,
    stat_nonfinite BIGINT,
    hist           TEXT,
    PRIMARY KEY (run_id, module_idx, kind, pos)
);

CREATE TABLE traces (
    run_id                 BIGINT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    batch                  BIGINT NOT NULL,
    seq                    BIGINT NOT NULL,
    device                 TEXT   NOT NULL,
    attn_implementation    TEXT,
    experts_implementation TEXT,
    total_flops            BIGINT NOT NULL
);

CREATE TABLE trace_modules (
    run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    name   TEXT   NOT NULL,
    flops  BIGINT NOT NULL,
    ops    TEXT   NOT NULL,
    PRIMARY KEY (run_id, name)
);

-- PostgreSQL text of 0002_analysis_cache.sql.
CREATE TABLE analysis_cache (
    run_id           BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    scenario_key     TEXT   NOT NULL,
    analyzer_version TEXT   NOT NULL,
    result           TEXT   NOT NULL,
    created_at       TEXT   NOT NULL,
    PRIMARY KEY (run_id, scenario_key, analyzer_version)
);

-- Analysis results per (run, scenario, analyzer version): repeating a report, a diff or a
-- history does not recompute, and a changed analyzer (new version) never reads stale rows.
CREATE TABLE analysis_cache (
    run_id           INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    scenario_key     TEXT    NOT NULL,   -- sha256 of the canonical scenario, targets and profiles
    analyzer_version TEXT    NOT NULL,
    result           TEXT    NOT NULL,   -- JSON
    created_at       TEXT    NOT NULL,
    PRIMARY KEY (run_id, scenario_key, analyzer_version)
) WITHOUT ROWID;

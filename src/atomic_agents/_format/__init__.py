"""The unit file format, below both the vault and the migration framework (it imports neither).

Frontmatter parsing and the smallest-diff renderer, the pydantic models and the
spec's validators, the schema-version rule, and the ``_migrations/`` script
chain with its in-memory handle. ``atomic_agents.vault`` and
``atomic_agents.migration`` re-export the public names; import them from there.
"""

"""LLM readers and judges: prompt templates, the judge protocol, metric specs, response parsing and the
one shared OpenAI-compatible client. Imports neither retrievers/ nor Ray stage code (tasks/)."""

"""Cluster, serving and schedule definitions (Ray Serve LLM apps, KubeRay manifests, cron recipes)."""

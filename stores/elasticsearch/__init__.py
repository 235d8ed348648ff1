"""The search index adapter for Elasticsearch 8 (and noida-db's endpoint)."""

from stores.elasticsearch.index import ElasticsearchIndex

__all__ = ["ElasticsearchIndex"]

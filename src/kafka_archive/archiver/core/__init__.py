"""The runtime's base types: the record, the nouns that cross processes, errors."""

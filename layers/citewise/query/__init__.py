"""How a question is answered: retrieval under the access filter, hybrid fusion, answers with
citations."""

"""Documents users write (workloads, catalogs, reviews, running fleets): bounded reading of
JSON or YAML text (`parse`, `files`, `limits`, `duplicates`) and the strict schema base
whose errors name the field (`strict`). Below every schema that uses them."""

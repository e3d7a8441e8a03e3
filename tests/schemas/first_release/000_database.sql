-- relevancy-monitor schema, step 000: the database.
CREATE DATABASE IF NOT EXISTS {database}

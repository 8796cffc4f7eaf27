CREATE TABLE IF NOT EXISTS compat_hello (greeting TEXT);

-- A receiver's answer is kept as the bytes it sent (its first 64 KiB), whatever they are: a NUL
-- byte, or bytes that are not UTF-8, cannot be stored in a text column, and one such answer once
-- held back the recording of every integration's results. The API decodes the bytes as UTF-8 when
-- it shows them (a byte that is not valid UTF-8 reads as U+FFFD).
ALTER TABLE delivery_attempts ALTER COLUMN response_body TYPE bytea USING convert_to(response_body, 'UTF8');

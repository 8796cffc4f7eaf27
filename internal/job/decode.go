package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// DecodeStrict decodes data, one JSON value and nothing after it, into v, refusing
// unknown fields: a misspelt field is an error, not a setting silently dropped.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

package store

import (
	"errors"
	"net"
	"regexp"
)

// passwordInURL matches the password part of a postgres URL or a password=... setting.
var passwordInURL = regexp.MustCompile(`(://[^:/@]*:)[^@]*@|(password=)\S+`)

// redact removes passwords from an error message: pgx includes the connection string
// in some parse errors, and errors end up in logs.
func redact(err error) error {
	if err == nil {
		return nil
	}
	msg := passwordInURL.ReplaceAllString(err.Error(), "${1}${2}xxxxx@")
	return errors.New(msg)
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

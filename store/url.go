package store

import (
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"
)

// CheckURL reports whether url is a connection string Open accepts (a
// postgres:// URL or a key=value DSN), without connecting. The error never
// repeats a password.
func CheckURL(url string) error {
	if url == "" {
		return errors.New("must not be empty")
	}
	if _, err := pgxpool.ParseConfig(url); err != nil {
		return errors.New("not a valid Postgres URL or key=value connection string")
	}
	return nil
}

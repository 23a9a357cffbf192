package mysqlstore

import (
	"errors"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
)

// The few places where MySQL and the embedded SQLite differ live here and
// in migrations/: the store itself has one code path.

// dialect names the migrations folder of a database kind.
type dialect string

const (
	dialectMySQL  dialect = "mysql"
	dialectSQLite dialect = "sqlite"
)

// SQLite extended result codes for constraint violations.
const (
	sqliteConstraintPrimaryKey = 1555
	sqliteConstraintUnique     = 2067
)

// isDuplicateKey reports a unique or primary key violation.
func isDuplicateKey(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1062
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqliteConstraintUnique || se.Code() == sqliteConstraintPrimaryKey
	}
	return false
}

// isTransientConflict reports an error that a retry of the same
// transaction resolves: a deadlock or lock wait timeout in MySQL, a busy
// database in SQLite, an order skipped for no row it can see.
func isTransientConflict(err error) bool {
	if errors.Is(err, errSkippedForNothing) {
		return true // a new transaction sees what this one could not
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqliteBusy || se.Code()&0xff == sqliteLocked
	}
	return false
}

const (
	sqliteBusy   = 5
	sqliteLocked = 6
)

package tmpexp

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

func run(t *testing.T, db *sql.DB, name string, cols string, row func(id int64) string, ignore bool, update string) {
	db.Exec("DROP TABLE IF EXISTS tmp_o")
	db.Exec("CREATE TABLE tmp_o LIKE tb_voucher_order")
	db.Exec("DROP TABLE IF EXISTS tmp_v")
	db.Exec("CREATE TABLE tmp_v LIKE tb_seckill_voucher")
	db.Exec("INSERT INTO tmp_v (voucher_id, stock, begin_time, end_time) VALUES (7, 1000000000, NOW(), NOW())")
	const n, batch = 50000, 500
	start := time.Now()
	for done := 0; done < n; done += batch {
		var q strings.Builder
		q.WriteString("INSERT ")
		if ignore {
			q.WriteString("IGNORE ")
		}
		q.WriteString("INTO tmp_o (" + cols + ") VALUES ")
		for i := 0; i < batch; i++ {
			if i > 0 {
				q.WriteString(",")
			}
			q.WriteString(row(int64(done + i + 1)))
		}
		tx, _ := db.Begin()
		if _, err := tx.Exec(q.String()); err != nil {
			t.Fatal(err)
		}
		if update != "" {
			if _, err := tx.Exec(update); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%-40s %8.0f orders/s", name, n/time.Since(start).Seconds())
}

func TestVariants(t *testing.T) {
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:3306)/test")
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Now().UTC().Format("2006-01-02 15:04:05.000")
	three := func(id int64) string { return fmt.Sprintf("(%d,%d,7)", id, id) }
	four := func(id int64) string { return fmt.Sprintf("(%d,%d,7,'%s')", id, id, ts) }
	six := func(id int64) string { return fmt.Sprintf("(%d,%d,7,1,'%s','%s')", id, id, ts, ts) }
	for range 2 {
		run(t, db, "3 cols", "id,user_id,voucher_id", three, false, "UPDATE tmp_v SET stock = stock WHERE voucher_id = 0")
		run(t, db, "4 cols", "id,user_id,voucher_id,create_time", four, false, "UPDATE tmp_v SET stock = stock WHERE voucher_id = 0")
		run(t, db, "6 cols", "id,user_id,voucher_id,status,create_time,update_time", six, false, "UPDATE tmp_v SET stock = stock WHERE voucher_id = 0")
		run(t, db, "6 cols ignore", "id,user_id,voucher_id,status,create_time,update_time", six, true, "UPDATE tmp_v SET stock = stock WHERE voucher_id = 0")
		run(t, db, "6 cols ignore + real update", "id,user_id,voucher_id,status,create_time,update_time", six, true, "UPDATE tmp_v SET stock = stock - 500, update_time = NOW(3) WHERE voucher_id = 7 AND stock >= 500")
		run(t, db, "4 cols ignore + real update", "id,user_id,voucher_id,create_time", four, true, "UPDATE tmp_v SET stock = stock - 500, update_time = NOW(3) WHERE voucher_id = 7 AND stock >= 500")
	}
	db.Exec("DROP TABLE IF EXISTS tmp_o")
	db.Exec("DROP TABLE IF EXISTS tmp_v")
}

package server

import "github.com/seckill-lab/seckill/core"

// syncBackend is sync: the synchronous original, the baseline.
var syncBackend = Backend{
	Name:      "sync",
	Iteration: "the synchronous original: no queue, the request runs the MySQL transaction (the baseline)",
	Sale: func(d Deps) (core.Reserver, core.StockBoard) {
		s := d.Store.SyncSale(d.Config.PayWindow)
		return s, s
	},
}

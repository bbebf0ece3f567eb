package engine

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/dolthub/go-mysql-server/server"
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/vitess/go/mysql"
)

// ServerConfig configures the MySQL wire-protocol server.
type ServerConfig struct {
	// Addr is the TCP address to listen on, e.g. 127.0.0.1:3306. Ignored when Listener is set.
	Addr string
	// Listener, when set, is used instead of listening on Addr (tests pass a listener on port 0).
	Listener net.Listener
	// RootPassword is the password of the 'root' account. An empty password is accepted only when the
	// server listens on a loopback address.
	RootPassword string
	// Version is advertised to clients.
	Version string
}

// Server is a running MySQL wire-protocol server over an Engine.
type Server struct {
	gms  *server.Server
	addr net.Addr
}

// Serve starts serving the engine over the MySQL wire protocol. It returns once the listener is open;
// call Start on the result to accept connections.
func (e *Engine) Serve(cfg ServerConfig) (*Server, error) {
	ln := cfg.Listener
	if ln == nil {
		// Check the address before listening, so a refused configuration never opens a socket.
		if cfg.RootPassword == "" {
			tcp, err := net.ResolveTCPAddr("tcp", cfg.Addr)
			if err != nil {
				return nil, fmt.Errorf("address %q: %w", cfg.Addr, err)
			}
			if !isLoopback(tcp) {
				return nil, errEmptyPassword(cfg.Addr)
			}
		}
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("listening on %s: %w", cfg.Addr, err)
		}
	}
	if cfg.RootPassword == "" && !isLoopback(ln.Addr()) {
		_ = ln.Close()
		return nil, errEmptyPassword(ln.Addr().String())
	}
	if err := e.SetRootPassword(cfg.RootPassword); err != nil {
		_ = ln.Close()
		return nil, err
	}
	s, err := server.NewServerWithHandler(server.Config{
		Protocol: "tcp",
		Listener: newStatsListener(ln), // answers COM_STATISTICS: see statistics.go
		Version:  cfg.Version,
	}, e.GMS, sql.NewContext, e.sessionBuilder, nil, e.wrapHandler) // wrapHandler: see limits.go
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("starting MySQL server: %w", err)
	}
	return &Server{gms: s, addr: ln.Addr()}, nil
}

// sessionBuilder gives each connection a session that knows its authenticated account, so GMS's grant
// system applies, and that starts in DefaultDatabase. The session's host is the account's (its grant
// pattern, e.g. analyst@%): GMS gives the account's host to a connection that authenticated with a
// password but the client's address to one that needed none, and ldpsql records who started a job,
// registered a model or made a release by account, the same from every connection of one account.
func (e *Engine) sessionBuilder(_ context.Context, conn *mysql.Conn, addr string) (sql.Session, error) {
	client := sql.Client{Capabilities: conn.Capabilities}
	if u, ok := conn.UserData.(sql.MysqlConnectionUser); ok {
		client.User, client.Address = u.User, u.Host
		if mdb := e.GMS.Analyzer.Catalog.MySQLDb; mdb != nil && mdb.Enabled() {
			rd := mdb.Reader()
			if account := mdb.GetUser(rd, u.User, u.Host, false); account != nil {
				client.Address = account.Host
			}
			rd.Close()
		}
	}
	s := e.Provider.newSession(sql.NewBaseSessionWithClientServer(addr, client, conn.ConnectionID))
	s.SetCurrentDatabase(DefaultDatabase)
	e.Provider.sessions.Store(conn.ConnectionID, s) // for its ROLLBACK at disconnect (forgetSession)
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.addr }

// Start accepts connections until Close is called. It returns nil after a clean Close.
func (s *Server) Start() error {
	err := s.gms.Start()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Close stops accepting connections and closes the open ones. The engine stays open.
func (s *Server) Close() error { return s.gms.Close() }

func errEmptyPassword(addr string) error {
	return fmt.Errorf("refusing to serve on %s with an empty root password: set --root-password or LDPSQL_ROOT_PASSWORD, or listen on a loopback address such as 127.0.0.1", addr)
}

func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

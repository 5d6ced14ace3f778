# shellcheck shell=bash
# The yardstick's configuration, sourced by bench/run.sh and bench/library_ceiling.sh so that both
# measure the same nginx: a static 200 ("ok\n"), 2 workers (or as many as asked: the pinned bench
# gives it one CPU and one worker), no access log, keep-alive connections never closed for their
# request count, every file of its own under one directory.

# Writes DIR/nginx.conf for a static 200 on 127.0.0.1:PORT; run it as
#   nginx -p DIR -c DIR/nginx.conf -e DIR/error.log
write_nginx_static_conf() { # dir port [workers]
  local dir=$1 port=$2 workers=${3:-2} user=""
  mkdir -p "$dir"
  # run as root, nginx's workers drop to an unprivileged user; otherwise they keep ours
  [ "$(id -u)" -ne 0 ] || user="user nobody nogroup;"
  cat >"$dir/nginx.conf" <<CONF
daemon off;
$user
worker_processes $workers;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  # wrk keeps its connections for the whole run: never close them for their request count
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$port;
    location / { default_type text/plain; return 200 "ok\n"; }
  }
}
CONF
}

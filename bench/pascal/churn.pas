{ The churn surface of seed 000 with TThreads: THREADS threads each do OPS
  steps on LIVE slots of their own: free the slot's block (FreeMem), GetMem a
  block of a random size in [MIN, MAX), write its first and last byte,
  checking them before the free. Millions of GetMem/FreeMem pairs per second.
    churn THREADS MIN MAX OPS [LIVE] }
program churn;
{$mode objfpc}{$H+}
uses {$ifdef USE_SPRY}spry,{$endif} {$ifdef USE_CMEM}cmem,{$endif}
  cthreads, Classes, SysUtils, Linux, UnixType;
{$I common.inc}

type
  TWorker = class(TThread)
    Id, Live: Integer;
    Lo, Hi, Ops: Int64;
    Bad: Integer;
    procedure Execute; override;
  end;

procedure TWorker.Execute;
var
  slots: array of PByte;
  sizes: array of Int64;
  seed: QWord;
  i, s: Int64;
  n: Int64;
  tag: Byte;
begin
  SetLength(slots, Live);
  SetLength(sizes, Live);
  seed := QWord(Id) * 6364136223846793005 + 1442695040888963407;
  for i := 0 to Ops - 1 do
    begin
      seed := seed * 6364136223846793005 + 1442695040888963407;
      s := (seed shr 33) mod QWord(Live);
      if slots[s] <> nil then
        begin
          tag := Byte(sizes[s]);
          if (slots[s][0] <> tag) or (slots[s][sizes[s] - 1] <> tag) then Inc(Bad);
          FreeMem(slots[s]);
        end;
      n := Lo + Int64((seed shr 13) mod QWord(Hi - Lo));
      slots[s] := GetMem(n);
      sizes[s] := n;
      slots[s][0] := Byte(n);
      slots[s][n - 1] := Byte(n);
    end;
  for i := 0 to Live - 1 do FreeMem(slots[i]);
  WorkerDone;
end;

var
  threads, i, bad, live: Integer;
  lo, hi, ops: Int64;
  workers: array of TWorker;
  t0, t: Double;
begin
  threads := ArgInt(1, 1);
  lo := ArgInt(2, 8);
  hi := ArgInt(3, 256);
  ops := ArgInt(4, 1000000);
  live := ArgInt(5, 64);
  SetLength(workers, threads);
  for i := 0 to threads - 1 do
    begin
      workers[i] := TWorker.Create(True);
      workers[i].Id := i; workers[i].Live := live;
      workers[i].Lo := lo; workers[i].Hi := hi; workers[i].Ops := ops;
    end;
  WorkersStarting(threads);
  t0 := Now_s;
  for i := 0 to threads - 1 do workers[i].Start;
  AllDone;
  t := Now_s - t0;
  bad := 0;
  for i := 0 to threads - 1 do
    begin
      workers[i].WaitFor;
      Inc(bad, workers[i].Bad);
      workers[i].Free;
    end;
  if bad <> 0 then
    begin
      WriteLn(StdErr, 'CORRUPT: ', bad, ' blocks changed while live');
      Halt(3);
    end;
  Report('pascal_churn', 'mops=' + FormatFloat('0.0000', threads * ops / t / 1e6) +
    ' seconds=' + Secs(t) + ' threads=' + IntToStr(threads));
end.

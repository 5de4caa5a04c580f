{ cthreads before spry: cthreads' initialization allocated from the RTL heap
  before spry came in, so spry installs its careful variant; those blocks
  must go back to the RTL heap, spry's to spry, threads included. }
program test_order;
{$mode objfpc}{$H+}
uses cthreads, spry, Classes, SysUtils;

{$I check.inc}

type
  TWorker = class(TThread)
    procedure Execute; override;
  end;

procedure TWorker.Execute;
var i: Integer; s: string;
begin
  s := '';
  for i := 1 to 20000 do
    begin
      s := s + IntToStr(i mod 10);
      if Length(s) > 500 then SetLength(s, 1);
    end;
end;

var
  w: array[0..7] of TWorker;
  i: Integer;
  st: TSpryStats;
begin
  Check(SpryInstalled, 'spry is not the memory manager');
  Check(SpryCareful, 'expected the careful variant after cthreads');
  for i := 0 to High(w) do w[i] := TWorker.Create(False);
  for i := 0 to High(w) do begin w[i].WaitFor; w[i].Free; end;
  spry_stats_get(@st);
  Check(st.errors = 0, 'programming errors counted: ' + IntToStr(st.errors));
  Check(st.foreign_frees = 0, 'RTL blocks reached spry: ' + IntToStr(st.foreign_frees));
  Done('test_order');
end.
